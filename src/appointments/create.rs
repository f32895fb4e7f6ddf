//! `create_booking`: books the call's customer (the model's tool, and a confirmed `booking`
//! action from the guided menu).

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::{Wanted, booking_failure, check_offered, renderer};
use crate::booking::Service;
use crate::booking::availability::block;
use crate::domain::LedgerKey;
use crate::ledger::normalize::parse_instant;
use crate::ledger::{
    CallContext, Effect, FieldKind, FieldSpec, KeyPolicy, KeyScope, Reach, Tool, ToolCall, ToolFailure, ToolSpec,
    derive_key,
};
use crate::store::{BookingStore, CatalogStore, Hold, NewAppointment, SettleWith, Store};

pub fn starts_at(call: &ToolCall<'_>) -> Result<DateTime<Utc>, ToolFailure> {
    call.args
        .str("starts_at")
        .and_then(|s| parse_instant(s).ok())
        .ok_or_else(|| ToolFailure::permanent("starts_at must be a date-time with an offset", Value::Null))
}

/// The `create_booking` key of a slot: what a move keys the appointment by from then on.
pub(super) fn create_key(
    ctx: &CallContext<'_>,
    professional_id: i64,
    start: DateTime<Utc>,
) -> Result<LedgerKey, ToolFailure> {
    let Effect::Write { policy, .. } = CREATE_BOOKING.effect else {
        unreachable!("create_booking is a write");
    };
    let args = CREATE_BOOKING
        .normalize(&json!({ "service_id": 0, "professional_id": professional_id, "starts_at": start.to_rfc3339() }))
        .map_err(|e| ToolFailure::permanent(format!("invalid booking: {e}"), Value::Null))?;
    let scope = KeyScope { tenant: ctx.tenant.id, customer: ctx.customer, trigger_message_id: ctx.trigger_message_id };
    derive_key(CREATE_BOOKING.name, policy, &scope, &CREATE_BOOKING.identity(&args))
        .map_err(|e| ToolFailure::Transient(e.to_string()))
}

/// Books the call's customer: `create_booking`, and a confirmed `booking` action.
pub async fn book(
    store: &Store,
    call: &ToolCall<'_>,
    service_id: i64,
    professional_id: i64,
    start: DateTime<Utc>,
) -> Result<Value, ToolFailure> {
    let ctx = call.ctx;
    let (Some(key), Some(attempt)) = (call.key, call.attempt) else {
        return Err(ToolFailure::Transient("bookings run through the ledger".into()));
    };
    let (services, professionals) = store.catalog(ctx.tenant.id).await.map_err(ToolFailure::storage)?;
    let render = renderer(call, services.clone(), professionals);
    // A takeover (an earlier attempt died or lost the row) finds what is booked under the
    // key, so the answer is the booking, not a refusal of its own slot.
    if attempt.previous.is_some()
        && let Some(existing) = store.appointment_by_key(ctx.tenant.id, key).await.map_err(ToolFailure::storage)?
    {
        return Ok(render(&existing));
    }
    let service: &Service = services
        .iter()
        .find(|s| s.id == service_id)
        .ok_or_else(|| ToolFailure::permanent("unknown service_id; call list_services", Value::Null))?;
    let wanted = Wanted { service_id, professional_id, start };
    check_offered(store, call, wanted).await?;
    let (starts_at, ends_at) = block(service, start);
    let hold_minutes = chrono::TimeDelta::minutes(i64::from(ctx.tenant.booking.deposit_minutes));
    let hold = (service.deposit.0 > 0)
        .then(|| Hold { deposit: service.deposit, expires_at: (ctx.now + hold_minutes).min(starts_at) });
    let new = NewAppointment {
        tenant: ctx.tenant.id,
        contact: ctx.customer,
        service_id,
        professional_id,
        starts_at,
        ends_at,
        price: service.price,
        key,
        allow_customer_overlap: false,
        hold,
    };
    let settle = SettleWith { fence: attempt.fence, render: &render };
    match store.insert_appointment(&new, Some(&settle), ctx.now).await {
        Ok(appointment) => Ok(render(&appointment)),
        Err(e) => Err(booking_failure(store, call, e, Some(wanted)).await),
    }
}

pub struct CreateBooking {
    pub store: Store,
}

pub static CREATE_BOOKING: ToolSpec = ToolSpec {
    name: "create_booking",
    description: "Books the customer for a service with a professional at a start time returned by check_availability.",
    effect: Effect::Write {
        policy: KeyPolicy::Business,
        on_conflict: "This customer already has a booking with this professional at this time, with other details. \
                      Do not book again: use reschedule_booking to move it or cancel_booking to drop it (list_my_bookings shows it).",
        reach: Reach::Local,
    },
    fields: &[
        FieldSpec {
            name: "service_id",
            kind: FieldKind::Id,
            required: true,
            identity: false,
            description: "From list_services.",
        },
        FieldSpec {
            name: "professional_id",
            kind: FieldKind::Id,
            required: true,
            identity: true,
            description: "From check_availability.",
        },
        FieldSpec {
            name: "starts_at",
            kind: FieldKind::Instant,
            required: true,
            identity: true,
            description: "RFC 3339 with offset, exactly as check_availability returned it.",
        },
    ],
};

#[async_trait]
impl Tool for CreateBooking {
    fn spec(&self) -> &'static ToolSpec {
        &CREATE_BOOKING
    }

    async fn run(&self, call: &ToolCall<'_>) -> Result<Value, ToolFailure> {
        let service_id = call.args.i64("service_id").unwrap_or_default();
        let professional_id = call.args.i64("professional_id").unwrap_or_default();
        book(&self.store, call, service_id, professional_id, starts_at(call)?).await
    }
}
