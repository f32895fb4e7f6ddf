//! Booking tools: `list_my_bookings` reads; `create_booking`, `cancel_booking` and
//! `reschedule_booking` write (business keys: the customer and, respectively, the
//! professional and start, the appointment, the appointment and its new start).
//!
//! Each write commits its effect and its ledger outcome in one transaction (the atomic phase,
//! see `crate::store::SettleWith`). Refusals are split: facts about the request (unknown
//! service, not the customer's booking, already started) are permanent and replayed; facts
//! about the world (slot taken, not offered now, the customer busy at that time) release the
//! key, so the same request later is evaluated again.
//!
//! A service with a deposit is booked `held` until the deposit's Pix is paid; the hold ends
//! `deposit_minutes` after booking, or at the start if that comes first. The charge itself is
//! sent by `crate::deposits`, not here: booking never waits on a Pix provider.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::catalog::{Bookings, free_slots, slots_json};
use super::{booking_json, permanent, transient};
use crate::actions::{ActionPayload, Proposal, Proposer};
use crate::booking::availability::block;
use crate::booking::{Appointment, BookingError, Professional, Service};
use crate::ledger::normalize::parse_instant;
use crate::ledger::{
    CallContext, Effect, FieldKind, FieldSpec, KeyPolicy, KeyScope, LedgerKey, Reach, Tool, ToolCall, ToolFailure,
    ToolSpec, derive_key,
};
use crate::messages::{ActionText, action_text};
use crate::store::{BookingStore, CatalogStore, Hold, Move, NewAppointment, SettleWith, Store};

fn starts_at(call: &ToolCall<'_>) -> Result<DateTime<Utc>, ToolFailure> {
    call.args
        .str("starts_at")
        .and_then(|s| parse_instant(s).ok())
        .ok_or_else(|| permanent("starts_at must be a date-time with an offset", Value::Null))
}

fn refused(message: impl Into<String>, details: Value) -> ToolFailure {
    ToolFailure::Refused { message: message.into(), details }
}

/// Checks that `start` is an offered start of `professional_id` for `service_id` (hours,
/// notice, horizon, step, time off), ignoring existing bookings: the database decides
/// overlaps.
async fn check_offered(store: &Store, call: &ToolCall<'_>, wanted: Wanted) -> Result<(), ToolFailure> {
    let date = wanted.start.with_timezone(&call.ctx.tenant.timezone).date_naive();
    let offered =
        free_slots(store, call, wanted.service_id, date, Some(wanted.professional_id), Bookings::Ignore).await?;
    if offered.iter().any(|(s, _)| s.starts_at == wanted.start) {
        return Ok(());
    }
    Err(refused(
        "not_available: that time is not offered (outside working hours, too soon or too far ahead)",
        json!({ "reason": "not_available", "alternatives": alternatives(store, call, wanted).await }),
    ))
}

/// What the customer can still choose that day, sent along with a refusal.
async fn alternatives(store: &Store, call: &ToolCall<'_>, wanted: Wanted) -> Value {
    let date = wanted.start.with_timezone(&call.ctx.tenant.timezone).date_naive();
    match free_slots(store, call, wanted.service_id, date, Some(wanted.professional_id), Bookings::Exclude).await {
        Ok(free) => Value::from(slots_json(&free, call.ctx.tenant.timezone)),
        Err(_) => Value::Array(Vec::new()),
    }
}

/// The booking as the model sees it, rendered inside the write's transaction from a catalog
/// read before it.
fn renderer(
    call: &ToolCall<'_>,
    services: Vec<Service>,
    professionals: Vec<Professional>,
) -> impl Fn(&Appointment) -> Value + Send + Sync + use<> {
    let tz = call.ctx.tenant.timezone;
    move |a: &Appointment| booking_json(a, &services, &professionals, tz)
}

/// The slot a write asked for: what a "slot taken" refusal offers alternatives to.
#[derive(Debug, Clone, Copy)]
struct Wanted {
    service_id: i64,
    professional_id: i64,
    start: DateTime<Utc>,
}

/// How a write that failed in the store is told to the model.
async fn booking_failure(store: &Store, call: &ToolCall<'_>, e: BookingError, wanted: Option<Wanted>) -> ToolFailure {
    let tz = call.ctx.tenant.timezone;
    match e {
        BookingError::SlotTaken => {
            let alternatives = match wanted {
                Some(wanted) => alternatives(store, call, wanted).await,
                None => Value::Array(Vec::new()),
            };
            refused(
                "slot_taken: that time was just taken by someone else",
                json!({ "reason": "slot_taken", "alternatives": alternatives }),
            )
        }
        BookingError::CustomerOverlap(own) => refused(
            format!(
                "conflict: the customer already has booking {} at {}; move or cancel it first, or choose another time",
                own.id,
                super::local(tz, own.starts_at)
            ),
            json!({ "reason": "customer_busy", "booking_id": own.id, "starts_at": super::local(tz, own.starts_at) }),
        ),
        BookingError::AlreadyStarted(a) => permanent(
            format!(
                "booking {} already started at {}; it can no longer be changed",
                a.id,
                super::local(tz, a.starts_at)
            ),
            json!({ "reason": "already_started", "booking_id": a.id }),
        ),
        BookingError::NotFound(what) => {
            permanent(format!("not found: {what} among this customer's bookings; call list_my_bookings"), Value::Null)
        }
        BookingError::Fenced => ToolFailure::Transient("another attempt took this call over".into()),
        BookingError::Store(e) => transient(e),
    }
}

/// The `create_booking` key of a slot: what a move keys the appointment by from then on.
fn create_key(ctx: &CallContext<'_>, professional_id: i64, start: DateTime<Utc>) -> Result<LedgerKey, ToolFailure> {
    let Effect::Write { policy, .. } = CREATE_BOOKING.effect else {
        unreachable!("create_booking is a write");
    };
    let args = CREATE_BOOKING
        .normalize(&json!({ "service_id": 0, "professional_id": professional_id, "starts_at": start.to_rfc3339() }))
        .map_err(|e| permanent(format!("invalid booking: {e}"), Value::Null))?;
    let scope = KeyScope { tenant: ctx.tenant.id, customer: ctx.customer, trigger_message_id: ctx.trigger_message_id };
    derive_key(CREATE_BOOKING.name, policy, &scope, &CREATE_BOOKING.identity(&args))
        .map_err(|e| ToolFailure::Transient(e.to_string()))
}

/// Books the call's customer: `create_booking`, and a confirmed `booking` action.
pub(crate) async fn book(
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
    let (services, professionals) = store.catalog(ctx.tenant.id).await.map_err(transient)?;
    let render = renderer(call, services.clone(), professionals);
    // A takeover (an earlier attempt died or lost the row) finds what is booked under the
    // key, so the answer is the booking, not a refusal of its own slot.
    if attempt.previous.is_some()
        && let Some(existing) = store.appointment_by_key(ctx.tenant.id, key).await.map_err(transient)?
    {
        return Ok(render(&existing));
    }
    let service: &Service = services
        .iter()
        .find(|s| s.id == service_id)
        .ok_or_else(|| permanent("unknown service_id; call list_services", Value::Null))?;
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

pub struct ListMyBookings {
    pub store: Store,
}

pub(super) static LIST_MY_BOOKINGS: ToolSpec = ToolSpec {
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
        let upcoming =
            self.store.upcoming_appointments(ctx.tenant.id, ctx.customer, ctx.now).await.map_err(transient)?;
        let (services, professionals) = self.store.catalog(ctx.tenant.id).await.map_err(transient)?;
        let bookings: Vec<Value> =
            upcoming.iter().map(|a| booking_json(a, &services, &professionals, ctx.tenant.timezone)).collect();
        Ok(json!({ "bookings": bookings }))
    }
}

pub struct CreateBooking {
    pub store: Store,
}

pub(super) static CREATE_BOOKING: ToolSpec = ToolSpec {
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

pub struct CancelBooking {
    pub proposer: Proposer,
}

pub(super) static CANCEL_BOOKING: ToolSpec = ToolSpec {
    name: "cancel_booking",
    description: "Asks the customer to confirm cancelling one of their upcoming bookings: sends Confirmar/Cancelar \
                  buttons and returns awaiting_confirmation. Nothing is cancelled until the customer taps Confirmar \
                  (or says so, and you call confirm_action).",
    effect: Effect::Write {
        policy: KeyPolicy::Business,
        on_conflict: "This booking was already handled. Call list_my_bookings to see the current state.",
        // A proposal: its offer message is queued after the proposal commits.
        reach: Reach::Outside,
    },
    fields: &[FieldSpec {
        name: "booking_id",
        kind: FieldKind::Id,
        required: true,
        identity: true,
        description: "From list_my_bookings.",
    }],
};

#[async_trait]
impl Tool for CancelBooking {
    fn spec(&self) -> &'static ToolSpec {
        &CANCEL_BOOKING
    }

    /// Proposes: the customer confirms with a button (or, typed, through `confirm_action`).
    async fn run(&self, call: &ToolCall<'_>) -> Result<Value, ToolFailure> {
        let ctx = call.ctx;
        let id = call.args.i64("booking_id").unwrap_or_default();
        let store = &self.proposer.store;
        let current = customer_booking(store, call, id).await?;
        let (services, _) = store.catalog(ctx.tenant.id).await.map_err(transient)?;
        let service = services.iter().find(|s| s.id == current.service_id).map_or("?", |s| s.name.as_str());
        let when = crate::messages::when_at(ctx.tenant.timezone, current.starts_at);
        let text =
            action_text(ActionText::OfferCancellation { service, when: &when }).map_err(|e| transient_text(&e))?;
        let proposal = Proposal::new(ActionPayload::Cancellation { booking_id: id }, text, ctx.now);
        self.proposer.propose(call, proposal).await
    }
}

/// The customer's active booking `id` that has not started, or why not.
async fn customer_booking(store: &Store, call: &ToolCall<'_>, id: i64) -> Result<Appointment, ToolFailure> {
    let ctx = call.ctx;
    match store.appointment(ctx.tenant.id, id).await.map_err(transient)? {
        Some(a) if a.contact_id == ctx.customer.0 && matches!(a.status.as_str(), "held" | "confirmed") => {
            if a.starts_at <= ctx.now {
                return Err(booking_failure(store, call, BookingError::AlreadyStarted(Box::new(a)), None).await);
            }
            Ok(a)
        }
        _ => Err(permanent(format!("booking {id} not found among this customer's upcoming bookings"), Value::Null)),
    }
}

fn transient_text(e: &dyn std::fmt::Display) -> ToolFailure {
    ToolFailure::Transient(e.to_string())
}

/// Cancels the call's customer's booking `id` in the call's atomic phase: a confirmed
/// `cancellation` action.
pub(crate) async fn cancel(store: &Store, call: &ToolCall<'_>, id: i64) -> Result<Value, ToolFailure> {
    let ctx = call.ctx;
    let Some(attempt) = call.attempt else {
        return Err(ToolFailure::Transient("cancellations run through the ledger".into()));
    };
    let (services, professionals) = store.catalog(ctx.tenant.id).await.map_err(transient)?;
    let render = renderer(call, services, professionals);
    let settle = SettleWith { fence: attempt.fence, render: &render };
    match store.cancel_appointment(ctx.tenant.id, ctx.customer, id, Some(&settle), ctx.now).await {
        Ok(cancelled) => Ok(render(&cancelled)),
        Err(e) => Err(booking_failure(store, call, e, None).await),
    }
}

pub struct RescheduleBooking {
    pub store: Store,
}

pub(super) static RESCHEDULE_BOOKING: ToolSpec = ToolSpec {
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
pub(crate) async fn move_booking(
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
    let (services, professionals) = store.catalog(ctx.tenant.id).await.map_err(transient)?;
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

/// The guided menu's booking confirmation: proposes the booking as a pending action (never
/// offered to the model, which books directly with `create_booking`).
pub struct ProposeBooking {
    pub proposer: Proposer,
}

pub(super) static PROPOSE_BOOKING: ToolSpec = ToolSpec {
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
        let (services, professionals) = store.catalog(ctx.tenant.id).await.map_err(transient)?;
        let service = services
            .iter()
            .find(|s| s.id == service_id)
            .ok_or_else(|| permanent("unknown service_id; call list_services", Value::Null))?;
        let professional = professionals
            .iter()
            .find(|p| p.id == professional_id)
            .ok_or_else(|| permanent("unknown professional_id", Value::Null))?;
        let wanted = Wanted { service_id, professional_id, start };
        check_offered(store, call, wanted).await?;
        let upcoming = store.upcoming_appointments(ctx.tenant.id, ctx.customer, ctx.now).await.map_err(transient)?;
        let (_, ends_at) = block(service, start);
        if let Some(own) = upcoming.iter().find(|a| a.starts_at < ends_at && a.ends_at > start) {
            let e = BookingError::CustomerOverlap(Box::new(own.clone()));
            return Err(booking_failure(store, call, e, Some(wanted)).await);
        }
        let when = crate::messages::when_at(ctx.tenant.timezone, start);
        let text = action_text(ActionText::OfferBooking {
            service: &service.name,
            professional: &professional.name,
            when: &when,
        })
        .map_err(|e| transient_text(&e))?;
        let payload = ActionPayload::Booking { service_id, professional_id, starts_at: start };
        self.proposer.propose(call, Proposal::new(payload, text, ctx.now)).await
    }
}
