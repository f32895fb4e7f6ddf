//! Payment notifications and the poller: how a payment at a Pix provider becomes a paid charge
//! here, once.
//!
//! Invariants:
//! - a notification is authenticated by its gateway (a token, a signature, a secret path)
//!   before anything is stored; an unauthenticated one stores nothing;
//! - each event is stored once (unique per tenant, provider and event id: the provider's event
//!   id, or the Pix `endToEndId` for Bacen callbacks) and answered at once; processing happens
//!   after, so a slow provider never makes the webhook time out;
//! - what a notification claims is never trusted: the charge's state is asked of the provider
//!   before it is marked paid, and marking it paid is the one conditional update of the paid
//!   path, so duplicates, redeliveries and the poller racing a webhook tell each party once;
//! - a notification can beat the response to its charge's own creation: for an unknown charge it
//!   is looked at again for a while, then kept and reported (`unmatched`), never answered with an
//!   error that makes the provider resend it forever; recording the charge later opens such an
//!   event again, in the same transaction, so the payment is not left to the poller; a payment
//!   for a charge no longer pending alerts the merchant;
//! - each look at an event is one process's (a claim leased past the longest look), so servers
//!   sharing a database count each attempt once and do not ask the provider in parallel;
//! - webhooks get lost: a poller asks the provider about charges still pending after a while,
//!   through the same paid path.

mod poll;
mod process;
mod receive;

pub use poll::{poll_pending, run_poller};
pub use process::{process_due, run_processor};
pub use receive::{ReceiveError, receive};

use chrono::{DateTime, Utc};

/// A stored notification event.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct PaymentEvent {
    pub id: i64,
    pub tenant_id: i64,
    pub provider: String,
    pub event_id: String,
    /// `txid` or `provider_ref`.
    pub ref_kind: String,
    pub charge_ref: String,
    /// received | processed | unmatched | alerted
    pub status: String,
    pub charge_id: Option<i64>,
    pub attempts: i64,
    pub last_error: Option<String>,
    pub received_at: DateTime<Utc>,
}
