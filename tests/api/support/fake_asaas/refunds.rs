//! The loopback Asaas's refunds (`POST /v3/payments/{id}/refund`, https://docs.asaas.com/reference/refund-payment
//! and https://docs.asaas.com/docs/refunds): a received Pix payment takes one full refund or
//! several partial ones whose sum stays within what was paid; `value` omitted means all that
//! is left; the answer is the payment, its `refunds` list holding `{dateCreated, status
//! (PENDING | DONE | CANCELLED), value, description, transactionReceiptUrl}`. Asaas keeps no
//! idempotency key: every POST that passes the checks is one more refund.
//!
//! Refused with `400` as Asaas refuses them: a payment not received (pending, overdue, already
//! refunded), a value that is not a positive number of whole centavos, a value above what is
//! left. A full refund turns the payment `REFUND_REQUESTED` until its refunds are done, then
//! `REFUNDED`; a partial one leaves it received.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::{FakeAsaas, Route, Shared, Step, answer, asaas_error, begin, locked, not_found};

/// How the fake treats new refunds.
#[derive(Default)]
pub(super) struct Settings {
    /// Settled at once (`DONE`) rather than left `PENDING` for a test to settle.
    done_at_once: bool,
    /// Answer the POST with the payment's `refunds` left out (`null`).
    answer_without_refunds: bool,
}

impl FakeAsaas {
    /// New refunds are `DONE` at once (by default they stay `PENDING` until [`Self::settle_refunds`]).
    pub(crate) fn refunds_done_at_once(&self) {
        locked(&self.inner).refunds.done_at_once = true;
    }
    /// The POST's answer leaves the payment's `refunds` out.
    pub(crate) fn answer_refunds_without_the_list(&self) {
        locked(&self.inner).refunds.answer_without_refunds = true;
    }
    /// The refunds of payment `id`, as Asaas lists them.
    pub(crate) fn refunds_of(&self, id: &str) -> Vec<Value> {
        let inner = locked(&self.inner);
        let payment = inner.payments.iter().find(|p| p["id"] == id).expect("a created payment");
        payment["refunds"].as_array().cloned().unwrap_or_default()
    }
    /// Every `PENDING` refund of payment `id` becomes `status` (`DONE`, `CANCELLED`).
    pub(crate) fn settle_refunds(&self, id: &str, status: &str) {
        let mut inner = locked(&self.inner);
        let payment = inner.payments.iter_mut().find(|p| p["id"] == id).expect("a created payment");
        for refund in payment["refunds"].as_array_mut().into_iter().flatten() {
            if refund["status"] == "PENDING" {
                refund["status"] = json!(status);
            }
        }
        follow_refunds(payment);
    }
}

pub(super) async fn refund_payment(
    State(inner): State<Shared>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Json(body): Json<Value>,
) -> Response {
    let hang = match begin(&inner, Route::RefundPayment, &headers).await {
        Step::Act { hang } => hang,
        Step::Answer(response) => return response,
    };
    let response = {
        let mut inner = locked(&inner);
        let settings = (inner.refunds.done_at_once, inner.refunds.answer_without_refunds);
        match inner.payments.iter_mut().find(|p| p["id"] == id.as_str() && p["deleted"] == false) {
            None => not_found(),
            Some(payment) => refund(payment, &body, settings),
        }
    };
    answer(hang, response).await
}

fn refund(payment: &mut Value, body: &Value, (done_at_once, without_list): (bool, bool)) -> Response {
    if !matches!(payment["status"].as_str(), Some("RECEIVED" | "CONFIRMED")) {
        return asaas_error(400, "invalid_action", "Só é possível estornar cobranças recebidas ou confirmadas.");
    }
    let left = cents(&payment["value"]).unwrap_or_default() - refunded(payment);
    let value = match body.get("value").filter(|v| !v.is_null()) {
        None => left,
        Some(v) => match cents(v).filter(|c| *c > 0) {
            Some(c) => c,
            None => return asaas_error(400, "invalid_value", "O valor do estorno deve ser um número maior que zero."),
        },
    };
    if value > left {
        return asaas_error(400, "invalid_value", "O valor informado excede o valor disponível para estorno.");
    }
    let n = payment["refunds"].as_array().map_or(0, Vec::len) + 1;
    let entry = json!({
        "dateCreated": chrono::Utc::now().format("%Y-%m-%d %H:%M:%S").to_string(),
        "status": if done_at_once { "DONE" } else { "PENDING" },
        "value": value as f64 / 100.0,
        "description": body["description"],
        "transactionReceiptUrl": format!("https://www.asaas.com/comprovantes/{}{n}", payment["id"].as_str().unwrap_or("")),
    });
    match payment["refunds"].as_array_mut() {
        Some(list) => list.push(entry),
        None => payment["refunds"] = json!([entry]),
    }
    follow_refunds(payment);
    let mut shown = payment.clone();
    if without_list {
        shown["refunds"] = Value::Null;
    }
    Json(shown).into_response()
}

/// A JSON number of whole centavos, in centavos.
fn cents(value: &Value) -> Option<i64> {
    let reais = value.as_f64()?;
    let cents = (reais * 100.0).round();
    ((reais * 100.0 - cents).abs() < 1e-6).then_some(cents as i64)
}

/// What the payment's refunds not cancelled add up to.
fn refunded(payment: &Value) -> i64 {
    let live = payment["refunds"].as_array().into_iter().flatten().filter(|r| r["status"] != "CANCELLED");
    live.filter_map(|r| cents(&r["value"])).sum()
}

/// The payment's status after its refunds changed: refunded in full, or received.
fn follow_refunds(payment: &mut Value) {
    let full = refunded(payment) == cents(&payment["value"]).unwrap_or_default();
    let pending = payment["refunds"].as_array().into_iter().flatten().any(|r| r["status"] == "PENDING");
    let status = match (full, pending) {
        (true, true) => "REFUND_REQUESTED",
        (true, false) => "REFUNDED",
        (false, _) if matches!(payment["status"].as_str(), Some("REFUND_REQUESTED" | "REFUNDED")) => "RECEIVED",
        (false, _) => return,
    };
    payment["status"] = json!(status);
}
