//! The loopback Mercado Pago's refunds, as documented for `POST /v1/payments/{id}/refunds`
//! (https://www.mercadopago.com.br/developers/en/reference/chargebacks/_payments_id_refunds/post)
//! and Pix refunds in contingency (…/cancellations-and-refunds/refund-pix):
//! - `X-Idempotency-Key` is mandatory (`400`, cause 4292 `Header-X-Idempotency-Key-can't-be-null`);
//!   a repeated key answers the refund it made; a key still in flight answers `409`;
//! - only an approved payment is refunded (`400`, 2063); an unknown one is `404` (2000);
//! - `amount` omitted means all that is left; else a positive number (4041 numeric, 4040
//!   positive) of whole centavos, no more than what is left;
//! - in contingency a new refund is `in_process`: answered `201` with `status: in_process` when
//!   the request says `X-Render-In-Process-Refunds: true`, else `400` although the refund exists;
//! - the payment follows its approved refunds: `status_detail: partially_refunded`, then
//!   `status: refunded` once they add up to it;
//! - `GET /v1/payments/{id}/refunds/{refund_id}`: the refund, or `404` (2032).

use std::collections::HashMap;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::{FakeMercadoPago, Inner, Post, Route, Shared, Step, answer, begin, locked, mp_error};

/// Numeric ids, as Mercado Pago's, apart from the payments'.
pub const FIRST_REFUND_ID: u64 = 2_100_000_000;

#[derive(Default)]
pub(super) struct Refunds {
    /// Idempotency key → (payment id, refund id).
    by_key: HashMap<String, (u64, u64)>,
    made: u64,
    /// New refunds stay `in_process` (a Pix refund held in contingency).
    contingency: bool,
    posts: Vec<Post>,
}

impl FakeMercadoPago {
    /// New refunds stay `in_process` until [`Self::settle_refund`].
    pub fn refunds_in_contingency(&self) {
        locked(&self.inner).refunds.contingency = true;
    }
    pub fn refund_posts(&self) -> Vec<Post> {
        locked(&self.inner).refunds.posts.clone()
    }
    /// The refunds of payment `id`.
    pub fn refunds_of(&self, id: &str) -> Vec<Value> {
        let id: u64 = id.parse().expect("a numeric id");
        let inner = locked(&self.inner);
        let payment = inner.payments.iter().find(|p| p["id"] == id).expect("a created payment");
        payment["refunds"].as_array().cloned().unwrap_or_default()
    }
    /// Refund `refund_id` becomes `status` (`approved`, `rejected`), and its payment follows.
    pub fn settle_refund(&self, refund_id: &str, status: &str) {
        let refund_id: u64 = refund_id.parse().expect("a numeric id");
        let mut inner = locked(&self.inner);
        let payment = inner
            .payments
            .iter_mut()
            .find(|p| p["refunds"].as_array().into_iter().flatten().any(|r| r["id"] == refund_id))
            .expect("a refund made");
        for refund in payment["refunds"].as_array_mut().into_iter().flatten() {
            if refund["id"] == refund_id {
                refund["status"] = json!(status);
            }
        }
        follow_refunds(payment);
    }
}

fn refund_error(status: u16, code: u32, message: &str) -> Response {
    let body = json!({ "message": message, "error": "bad_request", "status": status,
        "cause": [{ "code": code, "description": message, "data": null }] });
    (StatusCode::from_u16(status).expect("status"), Json(body)).into_response()
}

pub(super) async fn create_refund(
    State(inner): State<Shared>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
    let key = header("x-idempotency-key").filter(|k| !k.is_empty());
    // An empty body is a full refund.
    let body: Option<Value> = serde_json::from_slice(&body).ok();
    locked(&inner).refunds.posts.push(Post {
        authorization: header("authorization"),
        idempotency_key: key.clone(),
        body: body.clone().unwrap_or(Value::Null),
    });
    let held = match begin(&inner, Route::CreateRefund, &headers) {
        Step::Answer(response) => return response,
        Step::Act { hang } => Some(hang),
        Step::Hold => None,
    };
    let Some(key) = key else { return refund_error(400, 4292, "Header-X-Idempotency-Key-can't-be-null") };
    if locked(&inner).in_flight.contains(&key) {
        return mp_error(409, "Idempotency key is already being processed", "the same key is in use");
    }
    let hang = match held {
        Some(hang) => hang,
        None => {
            let release = {
                let mut inner = locked(&inner);
                inner.in_flight.insert(key.clone());
                inner.release.clone()
            };
            release.notified().await;
            locked(&inner).in_flight.remove(&key);
            false
        }
    };
    let render_in_process = header("x-render-in-process-refunds").as_deref() == Some("true");
    let response = refund(&mut locked(&inner), &id, &key, body.as_ref(), render_in_process);
    answer(hang, response).await
}

fn refund(inner: &mut Inner, id: &str, key: &str, body: Option<&Value>, render_in_process: bool) -> Response {
    let Inner { payments, refunds, .. } = inner;
    // "If the refund was already made, its information is returned without making a new one."
    if let Some(&(payment_id, refund_id)) = refunds.by_key.get(key) {
        let mut made =
            payments.iter().filter(|p| p["id"] == payment_id).flat_map(|p| p["refunds"].as_array()).flatten();
        if let Some(existing) = made.find(|r| r["id"] == refund_id) {
            return (StatusCode::CREATED, Json(existing.clone())).into_response();
        }
    }
    let id: Option<u64> = id.parse().ok();
    let Some(payment) = payments.iter_mut().find(|p| id.is_some() && p["id"].as_u64() == id) else {
        return refund_error(404, 2000, "Payment-not-found");
    };
    if payment["status"] != "approved" {
        return refund_error(400, 2063, "The-action-requested-is-not-valid-for-the-current-payment-state");
    }
    let left = cents(&payment["transaction_amount"]).unwrap_or_default() - committed(payment);
    let amount = match body.and_then(|b| b.get("amount")).filter(|a| !a.is_null()) {
        None => left,
        Some(a) => match cents(a) {
            None => return refund_error(400, 4041, "amount-attribute-must-be-numeric"),
            Some(c) if c <= 0 => return refund_error(400, 4040, "amount-attribute-must-be-positive"),
            Some(c) => c,
        },
    };
    if amount > left || left <= 0 {
        return mp_error(400, "Invalid refund amount", "the amount exceeds what is left to refund");
    }
    refunds.made += 1;
    let refund_id = FIRST_REFUND_ID + refunds.made;
    let refund = json!({
        "id": refund_id, "payment_id": payment["id"], "amount": amount as f64 / 100.0,
        "source": { "id": "987654321", "name": "Barbearia do Zé", "type": "collector" },
        "date_created": chrono::Utc::now().to_rfc3339(),
        "status": if refunds.contingency { "in_process" } else { "approved" },
        "unique_sequence_number": null,
    });
    match payment["refunds"].as_array_mut() {
        Some(list) => list.push(refund.clone()),
        None => payment["refunds"] = json!([refund.clone()]),
    }
    follow_refunds(payment);
    let payment_id = payment["id"].as_u64().unwrap_or_default();
    refunds.by_key.insert(key.to_owned(), (payment_id, refund_id));
    if refunds.contingency && !render_in_process {
        return mp_error(400, "Refund in process", "the refund could not be completed now");
    }
    (StatusCode::CREATED, Json(refund)).into_response()
}

pub(super) async fn get_refund(
    State(inner): State<Shared>,
    headers: HeaderMap,
    Path((id, refund_id)): Path<(String, String)>,
) -> Response {
    let hang = match begin(&inner, Route::GetRefund, &headers) {
        Step::Act { hang } => hang,
        Step::Answer(response) => return response,
        Step::Hold => return mp_error(500, "unexpected fault", "only creates are held"),
    };
    let (id, refund_id): (Option<u64>, Option<u64>) = (id.parse().ok(), refund_id.parse().ok());
    let response = {
        let inner = locked(&inner);
        match inner.payments.iter().find(|p| id.is_some() && p["id"].as_u64() == id) {
            None => refund_error(404, 2000, "Payment-not-found"),
            Some(payment) => {
                let mut made = payment["refunds"].as_array().into_iter().flatten();
                match made.find(|r| refund_id.is_some() && r["id"].as_u64() == refund_id) {
                    Some(refund) => Json(refund.clone()).into_response(),
                    None => refund_error(404, 2032, "Refund-not-found"),
                }
            }
        }
    };
    answer(hang, response).await
}

/// A JSON number of whole centavos, in centavos.
fn cents(value: &Value) -> Option<i64> {
    let reais = value.as_f64()?;
    let cents = (reais * 100.0).round();
    ((reais * 100.0 - cents).abs() < 1e-6).then_some(cents as i64)
}

/// What the payment's refunds not rejected add up to.
fn committed(payment: &Value) -> i64 {
    let live = payment["refunds"].as_array().into_iter().flatten().filter(|r| r["status"] != "rejected");
    live.filter_map(|r| cents(&r["amount"])).sum()
}

fn follow_refunds(payment: &mut Value) {
    let approved: i64 = payment["refunds"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["status"] == "approved")
        .filter_map(|r| cents(&r["amount"]))
        .sum();
    payment["transaction_amount_refunded"] = json!(approved as f64 / 100.0);
    if approved > 0 && approved == cents(&payment["transaction_amount"]).unwrap_or_default() {
        payment["status"] = json!("refunded");
        payment["status_detail"] = json!("refunded");
    } else if approved > 0 {
        payment["status_detail"] = json!("partially_refunded");
    }
}
