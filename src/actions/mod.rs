//! Pending actions: what needs a person's explicit "yes" before it happens (a cancellation, a
//! Pix charge, the guided menu's booking, a reminder's attendance).
//!
//! Invariants:
//! - an action is proposed as a `pending_actions` row with a random id, an expiry and the
//!   buttons that offer it; the button ids carry the action id and nothing else the server
//!   trusts ([`ClickId`]);
//! - at most one action of a kind about one subject is pending per conversation (partial
//!   unique index): a new proposal supersedes the older one in the same transaction;
//! - the only way out of `pending` is one conditional update (tenant, conversation, status
//!   pending, not expired, and for merchant kinds a staff clicker): two clicks, a click and a
//!   typed confirmation, or a click and the expiry, have exactly one winner;
//! - a confirmed action executes through the ledger under a key derived from the action id,
//!   so a crash between the confirm and the execution is finished by the retry, never doubled;
//! - a click is answered without the model, in its own job, keyed by the click's message id;
//! - money moves only on a button: a typed confirmation of a charge re-sends the buttons.

mod cancellation;
mod click;
mod execute;
mod expiry;
mod propose;
mod refund_offer;
mod refund_sweep;

pub use cancellation::{CANCEL_BOOKING, CancelBooking};
pub use click::{ClickHandler, ClickOutcome, confirm_typed};
pub use execute::ExecuteAction;
pub use expiry::{expire_due, run_expiry};
pub use propose::{Proposal, Proposer, offer_message, time_to_live};
pub use refund_offer::{offer_refund, refund_offer_text};
pub use refund_sweep::{RefundSweep, offer_due_refunds, run_refund_sweep};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::domain::{ActionId, ClickId, Decision};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActionKind {
    Cancellation,
    Booking,
    Move,
    Charge,
    Attendance,
    Refund,
}

impl ActionKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Cancellation => "cancellation",
            Self::Booking => "booking",
            Self::Move => "move",
            Self::Charge => "charge",
            Self::Attendance => "attendance",
            Self::Refund => "refund",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "cancellation" => Self::Cancellation,
            "booking" => Self::Booking,
            "move" => Self::Move,
            "charge" => Self::Charge,
            "attendance" => Self::Attendance,
            "refund" => Self::Refund,
            _ => return None,
        })
    }

    /// Only the tenant's staff may confirm these.
    pub fn merchant_only(self) -> bool {
        matches!(self, Self::Charge | Self::Refund)
    }

    /// May be confirmed by typed text (through `confirm_action`); money never is.
    pub fn typed_confirmation_allowed(self) -> bool {
        !matches!(self, Self::Charge | Self::Refund)
    }
}

/// What an action will do, typed per kind. Stored as JSON; its fingerprint is the SHA-256 of
/// that JSON, so a tampered or changed payload is visible.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ActionPayload {
    Cancellation {
        booking_id: i64,
    },
    Booking {
        service_id: i64,
        professional_id: i64,
        starts_at: DateTime<Utc>,
    },
    Move {
        booking_id: i64,
        starts_at: DateTime<Utc>,
    },
    Charge {
        customer_phone: crate::domain::PhoneE164,
        amount: crate::domain::Cents,
        description: String,
        /// The payer's CPF or CNPJ, when the merchant gave one with the charge.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        payer_document: Option<crate::domain::PayerDocument>,
    },
    Attendance {
        booking_id: i64,
    },
    /// Gives `amount` of a paid charge back to its payer.
    Refund {
        charge_id: i64,
        amount: crate::domain::Cents,
        /// Shared by the actions of one offer sent to several staff members: one refund, whoever
        /// confirms.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        offer: Option<String>,
    },
}

impl ActionPayload {
    pub fn kind(&self) -> ActionKind {
        match self {
            Self::Cancellation { .. } => ActionKind::Cancellation,
            Self::Booking { .. } => ActionKind::Booking,
            Self::Move { .. } => ActionKind::Move,
            Self::Charge { .. } => ActionKind::Charge,
            Self::Attendance { .. } => ActionKind::Attendance,
            Self::Refund { .. } => ActionKind::Refund,
        }
    }

    /// What the action is about: a newer proposal about the same subject replaces it.
    pub fn subject(&self) -> String {
        match self {
            Self::Cancellation { booking_id } | Self::Move { booking_id, .. } | Self::Attendance { booking_id } => {
                format!("appointment:{booking_id}")
            }
            Self::Booking { professional_id, starts_at, .. } => {
                format!("slot:{professional_id}:{}", starts_at.timestamp())
            }
            // The same charge asked again (the amount or text corrected otherwise is another).
            // The customer by their number's match key: one subject with or without the ninth digit.
            Self::Charge { customer_phone, amount, description, .. } => {
                let about = hex::encode(&Sha256::digest(description.as_bytes())[..8]);
                format!("charge:+{}:{}:{about}", customer_phone.match_key(), amount.0)
            }
            // A new offer of the same refund replaces the old; another amount is another refund.
            Self::Refund { charge_id, amount, .. } => format!("refund:{charge_id}:{}", amount.0),
        }
    }

    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    pub fn fingerprint(&self) -> String {
        hex::encode(Sha256::digest(self.to_json().to_string().as_bytes()))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActionStatus {
    Pending,
    Confirmed,
    Executed,
    Failed,
    Declined,
    Expired,
    Superseded,
    /// Confirmed, then its customer's data was erased before it ran: it never runs.
    Cancelled,
}

impl ActionStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Confirmed => "confirmed",
            Self::Executed => "executed",
            Self::Failed => "failed",
            Self::Declined => "declined",
            Self::Expired => "expired",
            Self::Superseded => "superseded",
            Self::Cancelled => "cancelled",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "pending" => Self::Pending,
            "confirmed" => Self::Confirmed,
            "executed" => Self::Executed,
            "failed" => Self::Failed,
            "declined" => Self::Declined,
            "expired" => Self::Expired,
            "superseded" => Self::Superseded,
            "cancelled" => Self::Cancelled,
            _ => return None,
        })
    }
}

/// How a person said yes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfirmedVia {
    /// An interactive reply button.
    Button,
    /// A template's quick-reply button.
    TemplateButton,
    /// Typed text, through the `confirm_action` tool (booking kinds only).
    Typed,
}

impl ConfirmedVia {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Button => "button",
            Self::TemplateButton => "template_button",
            Self::Typed => "typed",
        }
    }
}

/// A pending action as stored.
#[derive(Debug, Clone)]
pub struct PendingAction {
    pub id: ActionId,
    pub tenant: crate::domain::TenantId,
    pub conversation: crate::domain::ConversationId,
    pub payload: ActionPayload,
    pub fingerprint: String,
    pub status: ActionStatus,
    pub expires_at: DateTime<Utc>,
    /// What the person was asked (the buttons' message body).
    pub offer_text: String,
    pub offer_key: Option<String>,
    /// The trigger message of the turn that proposed it (none for reminders).
    pub proposed_by: Option<String>,
    /// The inbound message (click or typed text) that confirmed it.
    pub confirmed_message: Option<String>,
    pub result: Option<Value>,
    pub error: Option<String>,
    pub created_at: DateTime<Utc>,
}

impl PendingAction {
    pub fn kind(&self) -> ActionKind {
        self.payload.kind()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn click_ids_fit_a_whatsapp_button_id() {
        let id = ActionId::random();
        for decision in [Decision::Confirm, Decision::Decline] {
            assert!(ClickId::new(id, decision).id().len() <= crate::whatsapp::message::BUTTON_ID_MAX);
        }
    }

    #[test]
    fn subjects_name_what_an_action_is_about() {
        let cancel = ActionPayload::Cancellation { booking_id: 7 };
        let attend = ActionPayload::Attendance { booking_id: 7 };
        assert_eq!(cancel.subject(), attend.subject());
        assert_ne!(cancel.fingerprint(), attend.fingerprint());
        let charge = ActionPayload::Charge {
            customer_phone: crate::domain::PhoneE164::parse("+5511999990000").expect("a phone"),
            amount: crate::domain::Cents(5000),
            description: "Corte".into(),
            payer_document: None,
        };
        assert!(charge.subject().starts_with("charge:+551199990000:5000:"), "{}", charge.subject());
        assert_eq!(charge.kind(), ActionKind::Charge);
        assert!(charge.kind().merchant_only() && !charge.kind().typed_confirmation_allowed());
    }
}
