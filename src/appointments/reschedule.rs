//! `reschedule_booking`: moves an appointment (the model's tool, a confirmed `move` action and
//! the console's move), keyed from then on by its new slot's `create_booking` key.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::Value;

use super::{Wanted, booking_failure, check_offered, create::create_key, customer_booking, renderer, starts_at};
use crate::ledger::{Effect, FieldKind, FieldSpec, KeyPolicy, Reach, Tool, ToolCall, ToolFailure, ToolSpec};
use crate::store::{BookingStore, CatalogStore, Move, SettleWith, Store};

pub struct RescheduleBooking {
    pub store: Store,
}

pub static RESCHEDULE_BOOKING: ToolSpec = ToolSpec {
    name: "reschedule_booking",
    description: "Moves one of the customer's upcoming bookings to a new start returned by check_availability (same service and professional).",
    effect: Effect::Write {
        policy: KeyPolicy::Business,
        on_conflict: "This booking was already moved. Call list_my_bookings to see the current time.",
        reach: Reach::Local,
    },
    fields: &[
        FieldSpec {
            name: "booking_id",
            kind: FieldKind::Id,
            required: true,
            identity: true,
            description: "From list_my_bookings.",
        },
        FieldSpec {
            name: "starts_at",
            kind: FieldKind::Instant,
            required: true,
            identity: true,
            description: "RFC 3339 with offset, from check_availability.",
        },
    ],
};

#[async_trait]
impl Tool for RescheduleBooking {
    fn spec(&self) -> &'static ToolSpec {
        &RESCHEDULE_BOOKING
    }

    async fn run(&self, call: &ToolCall<'_>) -> Result<Value, ToolFailure> {
        let id = call.args.i64("booking_id").unwrap_or_default();
        move_booking(&self.store, call, id, starts_at(call)?, None).await
    }
}

/// Moves the call's customer's booking `id` to `start` (with `professional`, or the same one)
/// in the call's atomic phase: `reschedule_booking`, a confirmed `move` action, and the
/// console's move.
pub async fn move_booking(
    store: &Store,
    call: &ToolCall<'_>,
    id: i64,
    start: DateTime<Utc>,
    professional: Option<i64>,
) -> Result<Value, ToolFailure> {
    let ctx = call.ctx;
    let Some(attempt) = call.attempt else {
        return Err(ToolFailure::Transient("moves run through the ledger".into()));
    };
    let (services, professionals) = store.catalog(ctx.tenant.id).await.map_err(ToolFailure::storage)?;
    let render = renderer(call, services, professionals);
    let current = customer_booking(store, call, id).await?;
    let professional_id = professional.unwrap_or(current.professional_id);
    let wanted = Wanted { service_id: current.service_id, professional_id, start };
    // A move to where it already is changes nothing, but still goes through the fenced write:
    // its outcome is then stored about this booking, so a later move supersedes it instead of
    // leaving a replay of "it is at 14:00" behind.
    if (current.starts_at, current.professional_id) != (start, professional_id) {
        check_offered(store, call, wanted).await?;
    }
    let key = create_key(ctx, professional_id, start)?;
    let to = Move {
        tenant: ctx.tenant.id,
        contact: ctx.customer,
        id,
        professional_id,
        starts_at: start,
        ends_at: start + (current.ends_at - current.starts_at),
        key: &key,
    };
    let settle = SettleWith { fence: attempt.fence, render: &render };
    match store.move_appointment(&to, Some(&settle), ctx.now).await {
        Ok(moved) => Ok(render(&moved)),
        Err(e) => Err(booking_failure(store, call, e, Some(wanted)).await),
    }
}
