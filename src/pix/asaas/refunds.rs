//! Asaas refunds ("estornos"): `POST /v3/payments/{id}/refund` with `{"value", "description"}`,
//! answered with the payment, whose `refunds` list (`dateCreated`, `status` `PENDING` | `DONE` |
//! `CANCELLED`, `value`, `description`, `transactionReceiptUrl`) holds the refund. A Pix payment
//! takes one full refund or several partial ones, never more than was paid.
//!
//! Invariants:
//! - Asaas gives a refund no id and documents no idempotency key, so the refund's
//!   [`RefundId`] rides in its description (`Devolução <id>`), and the payment's `refunds` are
//!   searched for it: before posting (a repeated request returns the refund already made), by
//!   `find_refund`, and in the POST's answer;
//! - the POST is sent only while `req.window` is open; after an unknown outcome the caller waits
//!   out [`PixGateway::late_create_window`] and asks `find_refund` before sending again, as for
//!   a charge;
//! - `value` is always sent: without one Asaas refunds the whole payment;
//! - an answer that lists no refund of ours is read from the payment's status (`REFUNDED` done,
//!   `REFUND_REQUESTED` or `REFUND_IN_PROGRESS` processing); anything else is unknown;
//! - Asaas refunds carry no id of their own: `provider_ref` is `None`.
//!
//! [`PixGateway::late_create_window`]: crate::pix::PixGateway::late_create_window

use serde_json::{Value, json};

use super::{AsaasGateway, Payment};
use crate::pix::gateway::GatewayError;
use crate::pix::gateway::{RefundReceipt, RefundRequest, RefundState};
use crate::pix::http;
use crate::pix::refund::RefundId;

impl AsaasGateway {
    /// The refund already made under `req.id`, or a new one posted while the window is open.
    pub(super) async fn request_refund(&self, req: &RefundRequest) -> Result<RefundReceipt, GatewayError> {
        let value = http::reais(req.amount)?;
        let payment = self.payment_of(&req.charge).await?;
        if let Some(made) = receipt_in(&payment, &req.id)? {
            return Ok(made);
        }
        let body = json!({ "value": value, "description": marker(&req.id) });
        // Checked last, right before the one request a frozen worker must not send late.
        if !req.window.is_open() {
            return Err(GatewayError::WindowClosed);
        }
        let answered: Payment = self.post(&["payments", &payment.id, "refund"], &body).await?;
        match receipt_in(&answered, &req.id)? {
            Some(receipt) => Ok(receipt),
            None => by_payment_status(&answered),
        }
    }

    /// The refund made under `req.id`, if the payment lists one.
    pub(super) async fn lookup_refund(&self, req: &RefundRequest) -> Result<Option<RefundReceipt>, GatewayError> {
        receipt_in(&self.payment_of(&req.charge).await?, &req.id)
    }
}

/// What identifies our refund among a payment's: its description.
fn marker(id: &RefundId) -> String {
    format!("Devolução {id}")
}

/// The refund of `payment` whose description carries `id`, if any.
fn receipt_in(payment: &Payment, id: &RefundId) -> Result<Option<RefundReceipt>, GatewayError> {
    let ours = payment
        .refunds
        .as_ref()
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|r| r.get("description").and_then(Value::as_str).is_some_and(|d| d.contains(id.as_str())));
    let Some(refund) = ours else { return Ok(None) };
    let state = match refund.get("status").and_then(Value::as_str) {
        Some("PENDING") => RefundState::Processing,
        Some("DONE") => RefundState::Done,
        Some("CANCELLED") => RefundState::Failed("Asaas cancelled the refund".into()),
        other => {
            return Err(GatewayError::Unknown(format!(
                "refund {id} of Asaas payment {} has a status we do not know: {other:?}",
                payment.id
            )));
        }
    };
    Ok(Some(RefundReceipt { state, provider_ref: None }))
}

/// An accepted refund the answer does not list: processing, whatever the payment's status says
/// (a payment `REFUNDED` may be so by other refunds), until a lookup lists ours as done.
fn by_payment_status(payment: &Payment) -> Result<RefundReceipt, GatewayError> {
    let state = match payment.status.as_deref() {
        Some("REFUNDED" | "REFUND_REQUESTED" | "REFUND_IN_PROGRESS") => RefundState::Processing,
        other => {
            return Err(GatewayError::Unknown(format!(
                "Asaas accepted the refund of payment {} but lists none of ours (status {other:?})",
                payment.id
            )));
        }
    };
    Ok(RefundReceipt { state, provider_ref: None })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::LedgerKey;

    fn payment(status: &str, refunds: Value) -> Payment {
        Payment { id: "pay_1".into(), status: Some(status.into()), deleted: false, refunds: Some(refunds) }
    }

    #[test]
    fn our_refund_is_found_by_its_marker() {
        let id = RefundId::for_key(&LedgerKey::from_stored("refund/v1/a".into()));
        let other = RefundId::for_key(&LedgerKey::from_stored("refund/v1/b".into()));
        let refunds = json!([
            { "dateCreated": "2022-02-21 10:28:40", "status": "DONE", "value": 2.0, "description": "Overpayment" },
            { "status": "PENDING", "value": 1.0, "description": marker(&id) },
            { "status": "CANCELLED", "value": 1.0, "description": marker(&other) },
            "not an object",
        ]);
        let found = receipt_in(&payment("RECEIVED", refunds.clone()), &id).unwrap();
        assert_eq!(found, Some(RefundReceipt { state: RefundState::Processing, provider_ref: None }));
        let cancelled = receipt_in(&payment("RECEIVED", refunds), &other).unwrap().unwrap();
        assert!(matches!(cancelled.state, RefundState::Failed(_)));
        let third = RefundId::for_key(&LedgerKey::from_stored("refund/v1/c".into()));
        assert_eq!(receipt_in(&payment("RECEIVED", json!([])), &third).unwrap(), None);
        assert_eq!(receipt_in(&payment("RECEIVED", Value::Null), &third).unwrap(), None);
        let odd = json!([{ "status": "LATER", "description": marker(&third) }]);
        assert!(matches!(receipt_in(&payment("RECEIVED", odd), &third), Err(GatewayError::Unknown(_))));
    }

    #[test]
    fn without_our_refund_the_payment_status_tells() {
        let state = |status: &str| by_payment_status(&payment(status, Value::Null)).map(|r| r.state);
        // REFUNDED may be other refunds' doing: ours is done when a lookup lists it done.
        assert_eq!(state("REFUNDED").unwrap(), RefundState::Processing);
        assert_eq!(state("REFUND_REQUESTED").unwrap(), RefundState::Processing);
        assert_eq!(state("REFUND_IN_PROGRESS").unwrap(), RefundState::Processing);
        assert!(matches!(state("RECEIVED"), Err(GatewayError::Unknown(_))));
    }
}
