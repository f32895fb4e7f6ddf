//! Booking tools the agent alone offers: `list_my_bookings` reads; `propose_booking` and
//! `propose_move` offer the guided menu's booking and move as pending actions. The writes (`create_booking`,
//! `reschedule_booking`) are `crate::appointments`'; `cancel_booking` proposes through
//! `crate::actions`.

use async_trait::async_trait;
use serde_json::{Value, json};

use crate::actions::{ActionPayload, Proposal, Proposer};
use crate::appointments::{Wanted, booking_failure, booking_json, check_offered, customer_booking, starts_at};
use crate::booking::availability::block;
use crate::ledger::{Effect, FieldKind, FieldSpec, KeyPolicy, Reach, Tool, ToolCall, ToolFailure, ToolSpec};
use crate::messages::{ActionText, action_text};
use crate::store::{BookingError, BookingStore, CatalogStore, Store};

pub struct ListMyBookings {
    pub store: Store,
}

pub static LIST_MY_BOOKINGS: ToolSpec = ToolSpec {
    name: "list_my_bookings",
    description: "The customer's upcoming appointments (booking_id, service, professional, start in the business's time zone).",
    effect: Effect::Read,
    fields: &[],
};

#[async_trait]
impl Tool for ListMyBookings {
    fn spec(&self) -> &'static ToolSpec {
        &LIST_MY_BOOKINGS
    }

    async fn run(&self, call: &ToolCall<'_>) -> Result<Value, ToolFailure> {
        let ctx = call.ctx;
        let upcoming = self
            .store
            .upcoming_appointments(ctx.tenant.id, ctx.customer, ctx.now)
            .await
            .map_err(ToolFailure::storage)?;
        let (services, professionals) = self.store.catalog(ctx.tenant.id).await.map_err(ToolFailure::storage)?;
        let bookings: Vec<Value> =
            upcoming.iter().map(|a| booking_json(a, &services, &professionals, ctx.tenant.timezone)).collect();
        Ok(json!({ "bookings": bookings }))
    }
}

/// The guided menu's booking confirmation: proposes the booking as a pending action (never
/// offered to the model, which books directly with `create_booking`).
pub struct ProposeBooking {
    pub proposer: Proposer,
}

pub static PROPOSE_BOOKING: ToolSpec = ToolSpec {
    name: "propose_booking",
    description: "Offers the customer Confirmar/Cancelar buttons for a booking.",
    effect: Effect::Write {
        policy: KeyPolicy::PerTurn,
        on_conflict: "This booking was already offered in this turn.",
        reach: Reach::Outside,
    },
    fields: &[
        FieldSpec { name: "service_id", kind: FieldKind::Id, required: true, identity: true, description: "" },
        FieldSpec { name: "professional_id", kind: FieldKind::Id, required: true, identity: true, description: "" },
        FieldSpec { name: "starts_at", kind: FieldKind::Instant, required: true, identity: true, description: "" },
    ],
};

#[async_trait]
impl Tool for ProposeBooking {
    fn spec(&self) -> &'static ToolSpec {
        &PROPOSE_BOOKING
    }

    async fn run(&self, call: &ToolCall<'_>) -> Result<Value, ToolFailure> {
        let ctx = call.ctx;
        let store = &self.proposer.store;
        let service_id = call.args.i64("service_id").unwrap_or_default();
        let professional_id = call.args.i64("professional_id").unwrap_or_default();
        let start = starts_at(call)?;
        let (services, professionals) = store.catalog(ctx.tenant.id).await.map_err(ToolFailure::storage)?;
        let service = services
            .iter()
            .find(|s| s.id == service_id)
            .ok_or_else(|| ToolFailure::permanent("unknown service_id; call list_services", Value::Null))?;
        let professional = professionals
            .iter()
            .find(|p| p.id == professional_id)
            .ok_or_else(|| ToolFailure::permanent("unknown professional_id", Value::Null))?;
        let wanted = Wanted { service_id, professional_id, start };
        check_offered(store, call, wanted).await?;
        let (_, ends_at) = block(service, start);
        refuse_if_busy(store, call, wanted, ends_at, None).await?;
        let when = crate::messages::when_at(ctx.tenant.timezone, start);
        let text = action_text(ActionText::OfferBooking {
            service: &service.name,
            professional: &professional.name,
            when: &when,
        })
        .map_err(|e| ToolFailure::Transient(e.to_string()))?;
        let payload = ActionPayload::Booking { service_id, professional_id, starts_at: start };
        self.proposer.propose(call, Proposal::new(payload, text, ctx.now)).await
    }
}

/// The guided menu's move confirmation: proposes moving one of the customer's bookings as a
/// pending action (the model moves directly with `reschedule_booking`).
pub struct ProposeMove {
    pub proposer: Proposer,
}

pub static PROPOSE_MOVE: ToolSpec = ToolSpec {
    name: "propose_move",
    description: "Offers the customer Confirmar/Manter horário buttons for moving a booking.",
    effect: Effect::Write {
        policy: KeyPolicy::PerTurn,
        on_conflict: "This move was already offered in this turn.",
        reach: Reach::Outside,
    },
    fields: &[
        FieldSpec { name: "booking_id", kind: FieldKind::Id, required: true, identity: true, description: "" },
        FieldSpec { name: "starts_at", kind: FieldKind::Instant, required: true, identity: true, description: "" },
    ],
};

#[async_trait]
impl Tool for ProposeMove {
    fn spec(&self) -> &'static ToolSpec {
        &PROPOSE_MOVE
    }

    async fn run(&self, call: &ToolCall<'_>) -> Result<Value, ToolFailure> {
        let ctx = call.ctx;
        let store = &self.proposer.store;
        let id = call.args.i64("booking_id").unwrap_or_default();
        let start = starts_at(call)?;
        let current = customer_booking(store, call, id).await?;
        let wanted = Wanted { service_id: current.service_id, professional_id: current.professional_id, start };
        check_offered(store, call, wanted).await?;
        // Already there (an old time row tapped again), or onto another of the customer's
        // bookings: said as the booking flow says it, before any buttons.
        refuse_if_busy(store, call, wanted, start + (current.ends_at - current.starts_at), Some(id)).await?;
        let (services, professionals) = store.catalog(ctx.tenant.id).await.map_err(ToolFailure::storage)?;
        let service = services.iter().find(|s| s.id == current.service_id).map_or("?", |s| s.name.as_str());
        let professional =
            professionals.iter().find(|p| p.id == current.professional_id).map_or("?", |p| p.name.as_str());
        let tz = ctx.tenant.timezone;
        let text = action_text(ActionText::OfferMove {
            service,
            professional,
            from: &crate::messages::when_at(tz, current.starts_at),
            to: &crate::messages::when_at(tz, start),
        })
        .map_err(|e| ToolFailure::Transient(e.to_string()))?;
        let payload = ActionPayload::Move { booking_id: id, starts_at: start };
        self.proposer.propose(call, Proposal::new(payload, text, ctx.now)).await
    }
}

/// Refuses a proposal as `customer_busy` before its buttons go out: the customer already has an
/// upcoming booking over `[wanted.start, ends_at)`. The booking being moved (`moving`) counts
/// only when it is already at that start.
async fn refuse_if_busy(
    store: &Store,
    call: &ToolCall<'_>,
    wanted: Wanted,
    ends_at: chrono::DateTime<chrono::Utc>,
    moving: Option<i64>,
) -> Result<(), ToolFailure> {
    let ctx = call.ctx;
    let upcoming =
        store.upcoming_appointments(ctx.tenant.id, ctx.customer, ctx.now).await.map_err(ToolFailure::storage)?;
    let start = wanted.start;
    let busy = upcoming.iter().find(|a| match moving {
        Some(id) if a.id == id => a.starts_at == start,
        _ => a.starts_at < ends_at && a.ends_at > start,
    });
    match busy {
        Some(own) => {
            let e = BookingError::CustomerOverlap(Box::new(own.clone()));
            Err(booking_failure(store, call, e, Some(wanted)).await)
        }
        None => Ok(()),
    }
}
