//! The tool registry. Names and inputs are a contract with the model (and the guided agent):
//! `list_services`, `check_availability`, `list_my_bookings` read; `create_booking`,
//! `reschedule_booking` write through the ledger; `cancel_booking` proposes (a pending action
//! confirmed by a button) and `confirm_action` confirms a booking-kind proposal by text.

mod bookings;
mod catalog;
mod confirm;
mod merchant;
mod refunds;

use std::sync::Arc;

pub use bookings::{ListMyBookings, ProposeBooking, ProposeMove};
pub use catalog::{CheckAvailability, ListServices};
pub use confirm::ConfirmAction;
pub use merchant::{Agenda, ListCharges, ProposeCharge};
pub(crate) use merchant::{agenda_of, check_charge};
pub use refunds::{CancelPixCharge, ProposeRefund};

use crate::actions::{CancelBooking, ClickHandler, Proposer};
use crate::appointments::{CreateBooking, RescheduleBooking};
use crate::ledger::{Tool, ToolSpec};
use crate::store::Store;

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
        Arc::new(ProposeRefund { proposer: proposer.clone() }),
        Arc::new(CancelPixCharge { store: store.clone() }),
        // For a charge it only sends the buttons again: no text moves money.
        Arc::new(ConfirmAction { clicks: clicks.clone() }),
    ]
}

/// Every tool's input contract: the specs a model's (or the guided agent's) tool input is
/// checked and normalized against. Public for the fuzz targets.
pub fn tool_specs() -> [&'static ToolSpec; 13] {
    [
        &catalog::LIST_SERVICES,
        &catalog::CHECK_AVAILABILITY,
        &bookings::LIST_MY_BOOKINGS,
        &crate::appointments::CREATE_BOOKING,
        &crate::actions::CANCEL_BOOKING,
        &crate::appointments::RESCHEDULE_BOOKING,
        &bookings::PROPOSE_BOOKING,
        &confirm::CONFIRM_ACTION,
        &merchant::LIST_CHARGES,
        &merchant::AGENDA,
        &merchant::PROPOSE_CHARGE,
        &refunds::PROPOSE_REFUND,
        &refunds::CANCEL_PIX_CHARGE,
    ]
}
