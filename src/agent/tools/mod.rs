//! The tool registry. Names and inputs are a contract with the model (and the guided agent):
//! `list_services`, `check_availability`, `list_my_bookings` read; `create_booking`,
//! `reschedule_booking` write through the ledger; `cancel_booking` proposes (a pending action
//! confirmed by a button) and `confirm_action` confirms a booking-kind proposal by text.

mod bookings;
mod catalog;
mod confirm;
mod merchant;

use std::sync::Arc;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use serde_json::{Value, json};

pub use bookings::{CancelBooking, CreateBooking, ListMyBookings, ProposeBooking, RescheduleBooking};
pub(crate) use bookings::{book, cancel, move_booking};
pub use catalog::{CheckAvailability, ListServices};
pub use confirm::ConfirmAction;
pub use merchant::{Agenda, ListCharges, ProposeCharge};
pub(crate) use merchant::{agenda_of, check_charge};

use crate::actions::{ClickHandler, Proposer};
use crate::booking::{Appointment, Professional, Service};
use crate::ledger::{Tool, ToolFailure, ToolSpec};
use crate::store::{Store, StoreError};

/// Every tool, in the order the model sees them.
pub fn booking_tools(store: &Store, proposer: &Proposer, clicks: &Arc<ClickHandler>) -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(ListServices { store: store.clone() }),
        Arc::new(CheckAvailability { store: store.clone() }),
        Arc::new(ListMyBookings { store: store.clone() }),
        Arc::new(CreateBooking { store: store.clone() }),
        Arc::new(CancelBooking { proposer: proposer.clone() }),
        Arc::new(RescheduleBooking { store: store.clone() }),
        Arc::new(ConfirmAction { clicks: clicks.clone() }),
    ]
}

/// The merchant's tools, in the order the model sees them.
pub fn merchant_tools(store: &Store, proposer: &Proposer, clicks: &Arc<ClickHandler>) -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(ListCharges { store: store.clone() }),
        Arc::new(Agenda { store: store.clone() }),
        Arc::new(ProposeCharge { proposer: proposer.clone() }),
        // For a charge it only sends the buttons again: no text moves money.
        Arc::new(ConfirmAction { clicks: clicks.clone() }),
    ]
}

/// Every tool's input contract: the specs a model's (or the guided agent's) tool input is
/// checked and normalized against. Public for the fuzz targets.
pub fn tool_specs() -> [&'static ToolSpec; 11] {
    [
        &catalog::LIST_SERVICES,
        &catalog::CHECK_AVAILABILITY,
        &bookings::LIST_MY_BOOKINGS,
        &bookings::CREATE_BOOKING,
        &bookings::CANCEL_BOOKING,
        &bookings::RESCHEDULE_BOOKING,
        &bookings::PROPOSE_BOOKING,
        &confirm::CONFIRM_ACTION,
        &merchant::LIST_CHARGES,
        &merchant::AGENDA,
        &merchant::PROPOSE_CHARGE,
    ]
}

/// A store failure is transient: nothing was decided, the next attempt may succeed.
pub(crate) fn transient(e: StoreError) -> ToolFailure {
    ToolFailure::Transient(format!("storage error: {e}"))
}

pub(crate) fn permanent(message: impl Into<String>, details: Value) -> ToolFailure {
    ToolFailure::Permanent { message: message.into(), details }
}

/// RFC 3339 in the tenant's zone: what the model repeats to the customer.
pub(crate) fn local(tz: Tz, at: DateTime<Utc>) -> String {
    at.with_timezone(&tz).to_rfc3339()
}

pub(crate) fn booking_json(a: &Appointment, services: &[Service], professionals: &[Professional], tz: Tz) -> Value {
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
