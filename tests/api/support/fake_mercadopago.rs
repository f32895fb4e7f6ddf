//! A loopback Mercado Pago: `POST /v1/payments` with `X-Idempotency-Key` (a repeated key
//! answers with the payment already created, as documented), `GET /v1/payments/search`,
//! `GET /v1/payments/{id}`, `Authorization: Bearer`, errors as `{message, error, status,
//! cause[]}`, numeric payment ids. A create still being processed answers a second request with
//! the same key `409` (the key is in use), as idempotency keys behave while in flight. Refunds
//! (`/v1/payments/{id}/refunds`) are in `fake_mercadopago/refunds.rs`.

mod refunds;

pub use refunds::FIRST_REFUND_ID;

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use balcao::domain::Cents;
use balcao::pix::mercadopago::MercadoPagoGateway;
use balcao::pix::{MapSecrets, PixSettings, RawPix};
use chrono::DateTime;
use serde_json::{Value, json};

use super::loopback::{HANG, Loopback, brcode, locked};

pub const ACCESS_TOKEN: &str = "APP_USR-test-token";
pub const WEBHOOK_SECRET: &str = "mp-webhook-secret";
pub const PAYER_EMAIL: &str = "@clientes.barbearia.com.br";
/// Numeric ids, as Mercado Pago's.
pub const FIRST_ID: u64 = 1_319_000_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Route {
    CreatePayment,
    SearchPayments,
    GetPayment,
    UpdatePayment,
    CreateRefund,
    GetRefund,
}

#[derive(Debug, Clone)]
pub enum Fault {
    Respond(u16, Value),
    ActThenHang,
    /// Keep the create (or refund) in flight, its key in use, until [`FakeMercadoPago::release`];
    /// then act.
    HoldUntilReleased,
}

#[derive(Debug, Clone)]
pub struct Post {
    pub authorization: Option<String>,
    pub idempotency_key: Option<String>,
    pub body: Value,
}

#[derive(Default)]
struct Inner {
    payments: Vec<Value>,
    by_key: HashMap<String, u64>,
    faults: HashMap<Route, VecDeque<Fault>>,
    posts: Vec<Post>,
    in_flight: std::collections::HashSet<String>,
    release: Arc<tokio::sync::Notify>,
    refunds: refunds::Refunds,
}

type Shared = Arc<Mutex<Inner>>;

pub struct FakeMercadoPago {
    pub loopback: Loopback,
    inner: Shared,
}

impl FakeMercadoPago {
    pub async fn start() -> Self {
        let inner = Shared::default();
        let app = axum::Router::new()
            // A provider finishes a create it started whether or not the client still waits
            // (hyper drops a handler whose client went away; a task of its own goes on).
            .route(
                "/v1/payments",
                post(|state, headers, body| async move {
                    tokio::spawn(create_payment(state, headers, body))
                        .await
                        .unwrap_or_else(|_| mp_error(500, "internal error", "the create task failed"))
                }),
            )
            .route("/v1/payments/search", get(search_payments))
            .route("/v1/payments/{id}", get(get_payment).put(update_payment))
            .route(
                "/v1/payments/{id}/refunds",
                post(|state, headers, path, body| async move {
                    tokio::spawn(refunds::create_refund(state, headers, path, body))
                        .await
                        .unwrap_or_else(|_| mp_error(500, "internal error", "the refund task failed"))
                }),
            )
            .route("/v1/payments/{id}/refunds/{refund_id}", get(refunds::get_refund))
            .with_state(inner.clone());
        Self { loopback: Loopback::start(app).await, inner }
    }

    pub fn fail(&self, route: Route, fault: Fault) {
        locked(&self.inner).faults.entry(route).or_default().push_back(fault);
    }
    pub fn payments(&self) -> Vec<Value> {
        locked(&self.inner).payments.clone()
    }
    pub fn posts(&self) -> Vec<Post> {
        locked(&self.inner).posts.clone()
    }
    /// Lets a create held by [`Fault::HoldUntilReleased`] go on.
    pub fn release(&self) {
        locked(&self.inner).release.notify_one();
    }
    pub fn update(&self, id: &str, change: Value) {
        let id: u64 = id.parse().expect("a numeric id");
        let mut inner = locked(&self.inner);
        let payment = inner.payments.iter_mut().find(|p| p["id"] == id).expect("a created payment");
        for (k, v) in change.as_object().expect("an object") {
            payment[k] = v.clone();
        }
    }

    pub fn settings(&self) -> PixSettings {
        PixSettings::from_raw(RawPix {
            gateway: Some("mercadopago".into()),
            key: "caixa@barbearia.com.br".into(),
            key_type: "email".into(),
            merchant_name: "Barbearia do Zé".into(),
            merchant_city: "São Paulo".into(),
            base_url: Some(self.loopback.url.clone()),
            api_key_env: Some("MP_ACCESS_TOKEN".into()),
            webhook_secret_env: Some("MP_WEBHOOK_SECRET".into()),
            payer_email: Some(PAYER_EMAIL.into()),
            ..Default::default()
        })
        .expect("mercadopago settings")
    }

    pub fn gateway_with(&self, token: &str) -> MercadoPagoGateway {
        let secrets = MapSecrets(HashMap::from([
            ("MP_ACCESS_TOKEN".to_owned(), token.to_owned()),
            ("MP_WEBHOOK_SECRET".to_owned(), WEBHOOK_SECRET.to_owned()),
        ]));
        MercadoPagoGateway::new(&self.settings(), &secrets).expect("mercadopago gateway")
    }

    pub fn gateway(&self) -> MercadoPagoGateway {
        self.gateway_with(ACCESS_TOKEN)
    }
}

/// `PUT /v1/payments/{id}` with `status: cancelled`: only a payment not yet approved can be
/// cancelled.
async fn update_payment(
    State(inner): State<Shared>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Json(body): Json<Value>,
) -> Response {
    let hang = match begin(&inner, Route::UpdatePayment, &headers) {
        Step::Act { hang } => hang,
        Step::Answer(response) => return response,
        Step::Hold => return mp_error(500, "unexpected fault", "only creates are held"),
    };
    if body["status"] != "cancelled" {
        return mp_error(400, "Invalid status", "only status cancelled is supported here");
    }
    let id: Option<u64> = id.parse().ok();
    let response = {
        let mut inner = locked(&inner);
        match inner.payments.iter_mut().find(|p| id.is_some() && p["id"].as_u64() == id) {
            None => mp_error(404, "Payment not found", "payment not found"),
            Some(p) if p["status"] != "pending" && p["status"] != "in_process" => {
                mp_error(400, "Invalid operation for payment status", "the payment cannot be cancelled")
            }
            Some(p) => {
                p["status"] = json!("cancelled");
                p["status_detail"] = json!("by_collector");
                Json(p.clone()).into_response()
            }
        }
    };
    answer(hang, response).await
}

fn mp_error(status: u16, message: &str, cause: &str) -> Response {
    let body = json!({ "message": message, "error": "bad_request", "status": status,
        "cause": [{ "code": 4000 + u32::from(status), "description": cause, "data": null }] });
    (StatusCode::from_u16(status).expect("status"), Json(body)).into_response()
}

fn authorized(headers: &HeaderMap) -> bool {
    headers.get("authorization").and_then(|v| v.to_str().ok()) == Some(&format!("Bearer {ACCESS_TOKEN}"))
}

/// What a handler does after [`begin`].
enum Step {
    /// Act, then answer (after the client gave up, when `hang`).
    Act { hang: bool },
    /// Act once released.
    Hold,
    /// Answer this instead of acting.
    Answer(Response),
}

/// Checks the token and takes the route's next fault.
fn begin(inner: &Shared, route: Route, headers: &HeaderMap) -> Step {
    if !authorized(headers) {
        let body = json!({ "message": "invalid access token", "error": "unauthorized", "status": 401, "cause": [] });
        return Step::Answer((StatusCode::UNAUTHORIZED, Json(body)).into_response());
    }
    match locked(inner).faults.get_mut(&route).and_then(VecDeque::pop_front) {
        Some(Fault::Respond(status, body)) => {
            Step::Answer((StatusCode::from_u16(status).expect("status"), Json(body)).into_response())
        }
        Some(Fault::ActThenHang) => Step::Act { hang: true },
        Some(Fault::HoldUntilReleased) => Step::Hold,
        None => Step::Act { hang: false },
    }
}

async fn answer(hang: bool, response: Response) -> Response {
    if hang {
        tokio::time::sleep(HANG).await;
    }
    response
}

async fn create_payment(State(inner): State<Shared>, headers: HeaderMap, Json(body): Json<Value>) -> Response {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
    let key = header("x-idempotency-key");
    locked(&inner).posts.push(Post {
        authorization: header("authorization"),
        idempotency_key: key.clone(),
        body: body.clone(),
    });
    let step = begin(&inner, Route::CreatePayment, &headers);
    let Some(key) = key else {
        return mp_error(400, "X-Idempotency-Key header is required", "missing header X-Idempotency-Key");
    };
    if locked(&inner).in_flight.contains(&key) {
        return mp_error(409, "Idempotency key is already being processed", "the same key is in use");
    }
    let hang = match step {
        Step::Act { hang } => hang,
        Step::Hold => {
            let release = {
                let mut inner = locked(&inner);
                inner.in_flight.insert(key.clone());
                inner.release.clone()
            };
            release.notified().await;
            locked(&inner).in_flight.remove(&key);
            false
        }
        Step::Answer(response) => return response,
    };
    // "If the payment was already created, its information is returned without creating a new one."
    let replay = {
        let inner = locked(&inner);
        inner.by_key.get(&key).and_then(|id| inner.payments.iter().find(|p| p["id"] == *id).cloned())
    };
    if let Some(existing) = replay {
        return answer(hang, (StatusCode::OK, Json(existing)).into_response()).await;
    }
    if body["payment_method_id"] != "pix" {
        return mp_error(400, "Invalid payment_method_id", "payment_method_id must be pix here");
    }
    let Some(amount) = body["transaction_amount"].as_f64().filter(|a| *a > 0.0) else {
        return mp_error(400, "Invalid transaction_amount", "transaction_amount must be positive");
    };
    if !body["payer"]["email"].as_str().is_some_and(|e| e.contains('@')) {
        return mp_error(400, "payer.email must be a valid email", "payer.email is required");
    }
    let Some(expiry) = body["date_of_expiration"].as_str().filter(|d| DateTime::parse_from_rfc3339(d).is_ok()) else {
        return mp_error(400, "Invalid date_of_expiration", "date_of_expiration has an invalid format");
    };
    let payment = {
        let mut inner = locked(&inner);
        let n = inner.payments.len() as u64 + 1;
        let id = FIRST_ID + n;
        let code = brcode("MP", n, Cents((amount * 100.0).round() as i64));
        let payment = json!({
            "id": id, "status": "pending", "status_detail": "pending_waiting_transfer",
            "payment_method_id": "pix", "transaction_amount": amount, "description": body["description"],
            "external_reference": body["external_reference"], "date_of_expiration": expiry,
            "payer": body["payer"], "refunds": [], "transaction_amount_refunded": 0,
            "point_of_interaction": { "type": "PIX", "transaction_data": {
                "qr_code": code, "qr_code_base64": "iVBORw0KGgo=", "ticket_url": format!("https://example.invalid/{id}") } },
        });
        inner.payments.push(payment.clone());
        inner.by_key.insert(key, id);
        payment
    };
    answer(hang, (StatusCode::CREATED, Json(payment)).into_response()).await
}

async fn search_payments(
    State(inner): State<Shared>,
    headers: HeaderMap,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let hang = match begin(&inner, Route::SearchPayments, &headers) {
        Step::Act { hang } => hang,
        Step::Answer(response) => return response,
        Step::Hold => return mp_error(500, "unexpected fault", "only creates are held"),
    };
    let reference = query.get("external_reference").cloned();
    let mut found: Vec<Value> = locked(&inner)
        .payments
        .iter()
        .filter(|p| reference.is_none() || p["external_reference"].as_str() == reference.as_deref())
        .cloned()
        .collect();
    if query.get("criteria").map(String::as_str) == Some("desc") {
        found.reverse();
    }
    let total = found.len();
    answer(
        hang,
        Json(json!({ "paging": { "total": total, "limit": 30, "offset": 0 }, "results": found })).into_response(),
    )
    .await
}

async fn get_payment(State(inner): State<Shared>, headers: HeaderMap, Path(id): Path<String>) -> Response {
    let hang = match begin(&inner, Route::GetPayment, &headers) {
        Step::Act { hang } => hang,
        Step::Answer(response) => return response,
        Step::Hold => return mp_error(500, "unexpected fault", "only creates are held"),
    };
    let id: Option<u64> = id.parse().ok();
    let payment = locked(&inner).payments.iter().find(|p| id.is_some() && p["id"].as_u64() == id).cloned();
    let response = match payment {
        Some(p) => Json(p).into_response(),
        None => mp_error(404, "Payment not found", "payment not found"),
    };
    answer(hang, response).await
}
