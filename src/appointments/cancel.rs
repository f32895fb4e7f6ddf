//! Cancelling an appointment, once a person confirmed it (a `cancellation` action, or the
//! console), and the check that a booking is the customer's and still ahead.

use serde_json::Value;

use super::{booking_failure, renderer};
use crate::booking::Appointment;
use crate::ledger::{ToolCall, ToolFailure};
use crate::store::{BookingError, BookingStore, CatalogStore, SettleWith, Store};

/// The customer's active booking `id` that has not started, or why not.
pub async fn customer_booking(store: &Store, call: &ToolCall<'_>, id: i64) -> Result<Appointment, ToolFailure> {
    let ctx = call.ctx;
    match store.appointment(ctx.tenant.id, id).await.map_err(ToolFailure::storage)? {
        Some(a) if a.contact_id == ctx.customer.0 && matches!(a.status.as_str(), "held" | "confirmed") => {
            if a.starts_at <= ctx.now {
                return Err(booking_failure(store, call, BookingError::AlreadyStarted(Box::new(a)), None).await);
            }
            Ok(a)
        }
        _ => Err(ToolFailure::permanent(
            format!("booking {id} not found among this customer's upcoming bookings"),
            Value::Null,
        )),
    }
}

/// Cancels the call's customer's booking `id` in the call's atomic phase: a confirmed
/// `cancellation` action.
pub async fn cancel(store: &Store, call: &ToolCall<'_>, id: i64) -> Result<Value, ToolFailure> {
    let ctx = call.ctx;
    let Some(attempt) = call.attempt else {
        return Err(ToolFailure::Transient("cancellations run through the ledger".into()));
    };
    let (services, professionals) = store.catalog(ctx.tenant.id).await.map_err(ToolFailure::storage)?;
    let render = renderer(call, services, professionals);
    let settle = SettleWith { fence: attempt.fence, render: &render };
    match store.cancel_appointment(ctx.tenant.id, ctx.customer, id, Some(&settle), ctx.now).await {
        Ok(cancelled) => Ok(render(&cancelled)),
        Err(e) => Err(booking_failure(store, call, e, None).await),
    }
}
