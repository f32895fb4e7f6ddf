//! Booking operations: create, move and cancel an appointment, as ledger handlers over the
//! store, called alike by the agent's tools, the guided menu, the console and confirmed actions.
//!
//! Each write commits its effect and its ledger outcome in one transaction (the atomic phase,
//! see `crate::store::SettleWith`). Refusals are split: facts about the request (unknown
//! service, not the customer's booking, already started) are permanent and replayed; facts
//! about the world (slot taken, not offered now, the customer busy at that time) release the
//! key, so the same request later is evaluated again. Business keys: the customer and,
//! respectively, the professional and start, the appointment, the appointment and its new start.
//!
//! A service with a deposit is booked `held` until the deposit's Pix is paid; the hold ends
//! `deposit_minutes` after booking, or at the start if that comes first. The charge itself is
//! sent by `crate::money::deposits`, not here: booking never waits on a Pix provider.
//!
//! The rules themselves (the catalog, open hours, slots) are `crate::booking`'s, with no I/O;
//! the overlap of two appointments is the database's last word (`BookingError::SlotTaken`).

mod availability;
mod cancel;
mod create;
mod reschedule;

pub use availability::{Bookings, Wanted, alternatives, check_offered, free_slots, slots_json};
pub use cancel::{cancel, customer_booking};
pub use create::{CREATE_BOOKING, CreateBooking, book, starts_at};
pub use reschedule::{RESCHEDULE_BOOKING, RescheduleBooking, move_booking};

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use serde_json::{Value, json};

use crate::booking::{Appointment, Professional, Service};
use crate::ledger::{ToolCall, ToolFailure};
use crate::store::{BookingError, Store};

/// RFC 3339 in the tenant's zone: what the model repeats to the customer.
pub fn local(tz: Tz, at: DateTime<Utc>) -> String {
    at.with_timezone(&tz).to_rfc3339()
}

pub fn booking_json(a: &Appointment, services: &[Service], professionals: &[Professional], tz: Tz) -> Value {
    let mut booking = json!({
        "booking_id": a.id,
        "service_id": a.service_id,
        "service": services.iter().find(|s| s.id == a.service_id).map(|s| s.name.as_str()),
        "professional_id": a.professional_id,
        "professional": professionals.iter().find(|p| p.id == a.professional_id).map(|p| p.name.as_str()),
        "starts_at": local(tz, a.starts_at),
        "ends_at": local(tz, a.ends_at),
        "price": a.price().to_decimal(),
        "status": a.status,
    });
    if let Some(until) = a.awaiting_deposit() {
        booking["deposit"] = json!({
            "amount": a.deposit().to_decimal(),
            "pay_by": local(tz, until),
            "note": "The time is held, not confirmed: the customer receives a Pix for this deposit in a separate \
                     message; paying it by pay_by confirms the booking, otherwise the time is released. Tell the \
                     customer the amount and the deadline.",
        });
    }
    booking
}

/// The booking as the model sees it, rendered inside the write's transaction from a catalog
/// read before it.
pub fn renderer(
    call: &ToolCall<'_>,
    services: Vec<Service>,
    professionals: Vec<Professional>,
) -> impl Fn(&Appointment) -> Value + Send + Sync + use<> {
    let tz = call.ctx.tenant.timezone;
    move |a: &Appointment| booking_json(a, &services, &professionals, tz)
}

/// How a write that failed in the store is told to the model.
pub async fn booking_failure(
    store: &Store,
    call: &ToolCall<'_>,
    e: BookingError,
    wanted: Option<Wanted>,
) -> ToolFailure {
    let tz = call.ctx.tenant.timezone;
    match e {
        BookingError::SlotTaken => {
            let alternatives = match wanted {
                Some(wanted) => alternatives(store, call, wanted).await,
                None => Value::Array(Vec::new()),
            };
            ToolFailure::refused(
                "slot_taken: that time was just taken by someone else",
                json!({ "reason": "slot_taken", "alternatives": alternatives }),
            )
        }
        BookingError::CustomerOverlap(own) => ToolFailure::refused(
            format!(
                "conflict: the customer already has booking {} at {}; move or cancel it first, or choose another time",
                own.id,
                local(tz, own.starts_at)
            ),
            json!({ "reason": "customer_busy", "booking_id": own.id, "starts_at": local(tz, own.starts_at) }),
        ),
        BookingError::AlreadyStarted(a) => ToolFailure::permanent(
            format!("booking {} already started at {}; it can no longer be changed", a.id, local(tz, a.starts_at)),
            json!({ "reason": "already_started", "booking_id": a.id }),
        ),
        BookingError::NotFound(what) => ToolFailure::permanent(
            format!("not found: {what} among this customer's bookings; call list_my_bookings"),
            Value::Null,
        ),
        BookingError::Fenced => ToolFailure::Transient("another attempt took this call over".into()),
        BookingError::Store(e) => ToolFailure::storage(e),
    }
}
