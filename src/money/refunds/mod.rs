//! Refunds (devoluções): a paid charge's money given back, in full or in parts, on a staff
//! member's button only.
//!
//! Invariants:
//! - a refund is a `refund` pending action (merchant kind: only staff confirm it, never by typed
//!   text), proposed by the staff menu, the merchant agent (`propose_refund`), the console, or
//!   offered by itself for every charge paid too late (`refund_due`); every offer goes through
//!   the same buttons;
//! - the confirmed action executes through the ledger under the action's key; the refund's
//!   provider id is derived from that key ([`crate::pix::RefundId`]), recorded before the
//!   provider is called, and after an unknown outcome the provider is asked before anything is
//!   sent again, so duplicate clicks, two devices, a retry or a lost response refund once;
//! - the money is reserved before the request goes out, by one conditional update that never
//!   lets a charge's reserved sum pass its amount: two refunds racing for the same money (two
//!   offers tapped on two phones) cannot both go out; one offer sent to several staff members
//!   shares an offer id (unique per refund), so it is one refund whoever confirms; only the
//!   provider refusing the refund gives its reservation back (our side's failures are retried,
//!   and a call abandoned mid-way is finished by `crate::actions::RefundSweep`);
//! - processing → done (or failed) is one conditional update that moves the charge to
//!   `partially_refunded` or `refunded` and queues the notices in its transaction, whichever of
//!   the click, the refund's notification or the poll gets there first: the customer is told
//!   once (inside the 24-hour window), and the staff member once, by that transaction's notice
//!   (the click answers only a refund still processing); a refusal is recorded failed, gives
//!   the reservation back and is told the same way.

mod request;
mod settle;

pub use request::{RefundOrder, refund_charge, refund_refusal, too_much};
pub use settle::{Refunds, check_refunds, run_refunds};

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use crate::domain::Cents;

/// A refund as stored.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Refund {
    pub id: i64,
    pub charge_id: i64,
    pub action_id: String,
    /// The offer it answers, when one offer went to several staff members.
    pub offer_id: Option<String>,
    pub idempotency_key: String,
    /// Our id for it at the provider (see [`crate::pix::RefundId`]).
    pub refund_id: String,
    pub gateway: String,
    pub provider_ref: Option<String>,
    pub amount_cents: i64,
    /// processing | done | failed
    pub status: String,
    pub reason: Option<String>,
    pub merchant_conversation_id: Option<i64>,
    pub created_at: DateTime<Utc>,
    pub settled_at: Option<DateTime<Utc>>,
}

impl Refund {
    pub fn amount(&self) -> Cents {
        Cents(self.amount_cents)
    }

    /// The refund as the ledger and the click's answer keep it (no personal data: it outlives
    /// an erasure).
    pub fn to_json(&self) -> Value {
        json!({
            "refund_id": self.id,
            "charge_id": self.charge_id,
            "amount": self.amount().to_decimal(),
            "status": self.status,
        })
    }
}
