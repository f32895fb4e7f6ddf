//! Pix charges: created once a merchant's confirmed `charge` action executes, delivered to the
//! customer, and marked paid once.
//!
//! Invariants:
//! - a charge exists at most once per ledger key: the gateway receives the key (and a `txid`
//!   derived from it), `charges` has a unique key and a unique txid, and the row, the
//!   customer's messages and the ledger outcome commit in one transaction;
//! - after a takeover the recorded charge, then the gateway, is looked up before anything is
//!   created again;
//! - the customer is reached as the 24-hour window allows: free-form text with the copia e
//!   cola and the QR code (or a WhatsApp order, where the tenant enabled payments) inside the
//!   window, the tenant's approved template outside it, and no charge at all when neither is
//!   possible;
//! - pending → paid is one conditional update that writes both notices in its transaction:
//!   however often a payment is reported, each party is told once;
//! - a booking deposit's payment (`appointment_id` set) also confirms its appointment in that
//!   transaction, or, when the appointment can no longer be confirmed, records the charge
//!   `refund_due` and tells the merchant to give the money back (see `crate::money::deposits`);
//! - a charge closed here (expired, cancelled) is withdrawn at its provider once, unless it was
//!   paid first, which takes the paid path ([`withdraw`]).

mod create;
mod delivery;
mod paid;
pub mod withdraw;

pub use create::{CHARGE_TTL, ChargeOrder, PAYER_DOCUMENT_REQUIRED, create_charge, payer_document_required};
pub use delivery::{choose_via, inside_window};
pub use paid::{PaidOutcome, alert_late_payment, mark_paid, take_payment};
pub(crate) use paid::{late_payment_key, merchants};
pub use withdraw::{CANCEL_CHARGE, CancelCharge, Withdrawals, run_withdrawals};

use chrono::{DateTime, Utc};

use crate::domain::Cents;

/// The statuses of a charge whose money was received and may be given back.
pub const REFUNDABLE_STATUSES: [&str; 3] = ["paid", "refund_due", "partially_refunded"];

pub fn is_refundable_status(status: &str) -> bool {
    REFUNDABLE_STATUSES.contains(&status)
}

/// What a charge of `status` and `amount_cents`, of which refunds hold `reserved_cents`, may
/// still give back.
pub fn refundable(status: &str, amount_cents: i64, reserved_cents: i64) -> Cents {
    if !is_refundable_status(status) {
        return Cents(0);
    }
    Cents((amount_cents - reserved_cents).max(0))
}

/// A charge as stored.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Charge {
    pub id: i64,
    /// The merchant's confirmed action; none for a booking deposit.
    pub action_id: Option<String>,
    /// The appointment a deposit holds.
    pub appointment_id: Option<i64>,
    pub idempotency_key: String,
    pub txid: String,
    pub gateway: String,
    pub provider_ref: Option<String>,
    pub amount_cents: i64,
    pub description: String,
    pub customer_phone: String,
    pub customer_conversation_id: i64,
    /// Where the merchant who confirmed it is told; none for a booking deposit.
    pub merchant_conversation_id: Option<i64>,
    /// pending | paid | expired | cancelled | refund_due (paid too late, to give back) |
    /// partially_refunded | refunded
    pub status: String,
    pub copia_e_cola: String,
    /// text | order | template
    pub delivery: String,
    pub expires_at: DateTime<Utc>,
    pub paid_at: Option<DateTime<Utc>>,
    /// The Pix transaction that paid it, when the provider said.
    pub end_to_end_id: Option<String>,
    /// What confirmed refunds hold back (requested or done); never above `amount_cents`.
    pub refund_reserved_cents: i64,
    /// What the provider confirmed given back.
    pub refunded_cents: i64,
    pub created_at: DateTime<Utc>,
}

impl Charge {
    pub fn amount(&self) -> Cents {
        Cents(self.amount_cents)
    }

    /// What may still be refunded: the amount less what refunds already hold back.
    pub fn refundable(&self) -> Cents {
        refundable(&self.status, self.amount_cents, self.refund_reserved_cents)
    }

    /// The charge as the model and the merchant's answers see it.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "charge_id": self.id,
            "amount": self.amount().to_decimal(),
            "description": self.description,
            "customer_phone": self.customer_phone,
            "status": self.status,
            "delivery": self.delivery,
            "txid": self.txid,
            "refunded": Cents(self.refunded_cents).to_decimal(),
            "refundable": self.refundable().to_decimal(),
            "created_at": self.created_at.to_rfc3339(),
        })
    }
}
