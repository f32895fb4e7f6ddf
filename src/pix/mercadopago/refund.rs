//! Mercado Pago refunds: `POST /v1/payments/{id}/refunds` with `{"amount": 12.34}`, answered
//! `201` with the refund (`id`, `payment_id`, `amount`, `status` `approved` | `in_process` |
//! `rejected`).
//!
//! Invariants:
//! - `X-Idempotency-Key` is the refund's [`RefundId`](crate::pix::RefundId) (Mercado Pago
//!   refuses a refund without one, error 4292): the POST sent again returns the refund it made,
//!   and a `409` while the first is in flight is an unknown outcome, as for a keyed create;
//! - `X-Render-In-Process-Refunds: true` goes with every refund call, so a refund held in
//!   contingency comes back `201` with `status: in_process` (processing) instead of a `400`
//!   that would read as a refusal;
//! - `provider_ref` is the refund's id. `find_refund` needs it (`GET
//!   /v1/payments/{payment}/refunds/{refund}`, `404` → none); without it there is nothing to
//!   look up by (a refund does not carry its key), and `None` is safe because the caller sends
//!   the keyed POST again (the refund sweep finishes a call whose click gave up), which returns
//!   the refund already made;
//! - the amount is always sent: without one Mercado Pago refunds the whole payment.

use reqwest::{RequestBuilder, StatusCode};
use serde::Deserialize;
use serde_json::json;

use super::{MercadoPagoGateway, PROVIDER, readable_error, string_or_number};
use crate::pix::gateway::{ChargeRef, GatewayError};
use crate::pix::gateway::{RefundReceipt, RefundRequest, RefundState};
use crate::pix::http;

const IDEMPOTENCY_HEADER: &str = "X-Idempotency-Key";
const IN_PROCESS_HEADER: &str = "X-Render-In-Process-Refunds";

#[derive(Deserialize)]
struct Refund {
    #[serde(deserialize_with = "string_or_number")]
    id: String,
    #[serde(default)]
    status: Option<String>,
}

impl MercadoPagoGateway {
    /// The keyed `POST /v1/payments/{id}/refunds`.
    pub(super) async fn request_refund(&self, req: &RefundRequest) -> Result<RefundReceipt, GatewayError> {
        let amount = http::reais(req.amount)?;
        let payment = self.payment_id(&req.charge).await?;
        let url = http::url(&self.base, &["v1", "payments", &payment, "refunds"], &[])?;
        let request = self
            .refund_call(self.http.post(url))
            .header(IDEMPOTENCY_HEADER, req.id.as_str())
            .json(&json!({ "amount": amount }));
        let refund: Refund = http::send_keyed_create(PROVIDER, request, readable_error).await?;
        receipt(refund)
    }

    /// `GET /v1/payments/{payment}/refunds/{req.provider_ref}`; `None` without a refund id.
    pub(super) async fn lookup_refund(&self, req: &RefundRequest) -> Result<Option<RefundReceipt>, GatewayError> {
        let Some(refund) = req.provider_ref.as_deref().map(str::trim).filter(|r| !r.is_empty()) else {
            return Ok(None);
        };
        let payment = self.payment_id(&req.charge).await?;
        let url = http::url(&self.base, &["v1", "payments", &payment, "refunds", refund], &[])?;
        let response = self.refund_call(self.http.get(url)).send().await.map_err(|e| http::transport(PROVIDER, &e))?;
        let status = response.status();
        let body = response.bytes().await.map_err(|e| http::transport(PROVIDER, &e))?;
        if status == StatusCode::NOT_FOUND {
            return Ok(None);
        }
        http::read_json(PROVIDER, status, &body, readable_error).and_then(receipt).map(Some)
    }

    fn refund_call(&self, request: RequestBuilder) -> RequestBuilder {
        request.bearer_auth(self.token.expose()).header(IN_PROCESS_HEADER, "true")
    }

    /// The charge's payment id: recorded, or found by `external_reference`.
    async fn payment_id(&self, charge: &ChargeRef) -> Result<String, GatewayError> {
        if let Some(id) = charge.provider_ref.as_deref().map(str::trim).filter(|id| !id.is_empty()) {
            return Ok(id.to_owned());
        }
        match self.payment_by_reference(&charge.txid).await? {
            Some(payment) => Ok(payment.id),
            None => Err(GatewayError::Rejected(format!(
                "Mercado Pago has no payment with external_reference {}",
                charge.txid
            ))),
        }
    }
}

fn receipt(refund: Refund) -> Result<RefundReceipt, GatewayError> {
    let state = match refund.status.as_deref().unwrap_or_default() {
        "approved" => RefundState::Done,
        "in_process" => RefundState::Processing,
        "rejected" | "cancelled" => RefundState::Failed(format!("Mercado Pago refused refund {}", refund.id)),
        other => {
            return Err(GatewayError::Unknown(format!(
                "Mercado Pago refund {} has a status we do not know: {other:?}",
                refund.id
            )));
        }
    };
    Ok(RefundReceipt { state, provider_ref: Some(refund.id) })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(json: serde_json::Value) -> Result<RefundReceipt, GatewayError> {
        receipt(serde_json::from_value(json).unwrap())
    }

    #[test]
    fn statuses_map_to_refund_states() {
        let refund = |status: &str| {
            json!({ "id": 9_876_543_210_u64, "payment_id": 1_234_567_890_u64, "amount": 25.0, "status": status,
                    "source": { "id": "987654321", "name": "Merchant Account", "type": "collector" },
                    "date_created": "2026-05-25T14:10:00.000-03:00", "unique_sequence_number": null })
        };
        let done = read(refund("approved")).unwrap();
        assert_eq!(done, RefundReceipt { state: RefundState::Done, provider_ref: Some("9876543210".into()) });
        assert_eq!(read(refund("in_process")).unwrap().state, RefundState::Processing);
        assert!(matches!(read(refund("rejected")).unwrap().state, RefundState::Failed(_)));
        assert!(matches!(read(refund("mystery")), Err(GatewayError::Unknown(m)) if m.contains("mystery")));
    }
}
