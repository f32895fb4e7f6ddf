//! A loopback Asaas: `/v3/customers` (`cpfCnpj` required and checked, as documented),
//! `PUT /v3/customers/{id}`, `/v3/payments` (refused for a customer without CPF/CNPJ, as on
//! accounts that enforce it), `/v3/payments/{id}`, `/v3/payments/{id}/pixQrCode` and
//! `POST /v3/payments/{id}/refund` (see `fake_asaas/refunds.rs`), the `access_token` header,
//! errors as `{"errors":[{code, description}]}`; deleted payments left out of lists, as Asaas
//! does.

// By path, so it resolves alike here and where the chaos campaign includes this file by path.
#[path = "fake_asaas/refunds.rs"]
mod refunds;

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use balcao::domain::Cents;
use balcao::pix::asaas::AsaasGateway;
use balcao::pix::{MapSecrets, PixSettings, RawPix};
use chrono::{NaiveDate, Utc};
use serde_json::{Value, json};

use super::loopback::{HANG, Loopback, brcode, locked};

pub(crate) const API_KEY: &str = "$aact_test_key_000";
pub(crate) const WEBHOOK_TOKEN: &str = "asaas-webhook-token-123";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Route {
    ListCustomers,
    CreateCustomer,
    UpdateCustomer,
    ListPayments,
    CreatePayment,
    GetPayment,
    DeletePayment,
    PixQrCode,
    RefundPayment,
}

#[derive(Debug, Clone)]
pub(crate) enum Fault {
    /// Answer this, acting on nothing.
    Respond(u16, Value),
    /// Act, then answer only after the client gave up.
    ActThenHang,
    /// Hold the request until the test releases it, then act: a slow network, or a client
    /// whose request waited.
    Hold(Arc<tokio::sync::Notify>),
}

#[derive(Debug, Clone)]
pub(crate) struct Seen {
    pub(crate) route: Route,
    pub(crate) access_token: Option<String>,
    pub(crate) user_agent: Option<String>,
}

#[derive(Default)]
struct Inner {
    customers: Vec<Value>,
    payments: Vec<Value>,
    codes: HashMap<String, String>,
    faults: HashMap<Route, VecDeque<Fault>>,
    seen: Vec<Seen>,
    refunds: refunds::Settings,
}

type Shared = Arc<Mutex<Inner>>;

pub(crate) struct FakeAsaas {
    pub(crate) loopback: Loopback,
    inner: Shared,
}

impl FakeAsaas {
    pub(crate) async fn start() -> Self {
        let inner = Shared::default();
        let app = axum::Router::new()
            .route("/v3/customers", get(list_customers).post(create_customer))
            .route("/v3/customers/{id}", put(update_customer))
            // A provider finishes a create it started whether or not the client still waits
            // (hyper drops a handler whose client went away; a task of its own goes on).
            .route(
                "/v3/payments",
                get(list_payments).post(|state, headers, body| async move {
                    tokio::spawn(create_payment(state, headers, body)).await.unwrap_or_else(|_| not_found())
                }),
            )
            .route("/v3/payments/{id}", get(get_payment).delete(delete_payment))
            .route("/v3/payments/{id}/pixQrCode", get(pix_qr_code))
            // Like a create, a refund started goes on after the client gave up.
            .route(
                "/v3/payments/{id}/refund",
                post(|state, headers, path, body| async move {
                    tokio::spawn(refunds::refund_payment(state, headers, path, body))
                        .await
                        .unwrap_or_else(|_| not_found())
                }),
            )
            .with_state(inner.clone());
        Self { loopback: Loopback::start(app).await, inner }
    }

    pub(crate) fn fail(&self, route: Route, fault: Fault) {
        locked(&self.inner).faults.entry(route).or_default().push_back(fault);
    }
    pub(crate) fn customers(&self) -> Vec<Value> {
        locked(&self.inner).customers.clone()
    }
    /// A customer made outside us (in Asaas's panel, or before we sent documents).
    pub(crate) fn add_customer(&self, customer: Value) {
        locked(&self.inner).customers.push(customer);
    }
    pub(crate) fn payments(&self) -> Vec<Value> {
        locked(&self.inner).payments.clone()
    }
    pub(crate) fn code_of(&self, payment_id: &str) -> String {
        locked(&self.inner).codes.get(payment_id).cloned().expect("a created payment")
    }
    pub(crate) fn seen(&self) -> Vec<Seen> {
        locked(&self.inner).seen.clone()
    }
    /// The customer pays payment `id`: received, unless it was removed, since Asaas takes no
    /// payment for a deleted charge. Whether it was received.
    pub(crate) fn receive(&self, payment_id: &str) -> bool {
        let mut inner = locked(&self.inner);
        match inner.payments.iter_mut().find(|p| p["id"] == payment_id && p["deleted"] == false) {
            Some(payment) => {
                payment["status"] = json!("RECEIVED");
                true
            }
            None => false,
        }
    }

    pub(crate) fn update(&self, payment_id: &str, change: Value) {
        let mut inner = locked(&self.inner);
        let payment = inner.payments.iter_mut().find(|p| p["id"] == payment_id).expect("a created payment");
        for (k, v) in change.as_object().expect("an object") {
            payment[k] = v.clone();
        }
    }

    pub(crate) fn settings(&self) -> PixSettings {
        PixSettings::from_raw(RawPix {
            gateway: Some("asaas".into()),
            key: "caixa@barbearia.com.br".into(),
            key_type: "email".into(),
            merchant_name: "Barbearia do Zé".into(),
            merchant_city: "São Paulo".into(),
            // Written with `/v3`, as the reference writes Asaas's base URL.
            base_url: Some(format!("{}/v3/", self.loopback.url)),
            api_key_env: Some("ASAAS_API_KEY".into()),
            webhook_secret_env: Some("ASAAS_WEBHOOK_TOKEN".into()),
            ..Default::default()
        })
        .expect("asaas settings")
    }

    pub(crate) fn gateway_with(&self, key: &str) -> AsaasGateway {
        let secrets = MapSecrets(HashMap::from([
            ("ASAAS_API_KEY".to_owned(), key.to_owned()),
            ("ASAAS_WEBHOOK_TOKEN".to_owned(), WEBHOOK_TOKEN.to_owned()),
        ]));
        AsaasGateway::new(&self.settings(), &secrets).expect("asaas gateway")
    }

    pub(crate) fn gateway(&self) -> AsaasGateway {
        self.gateway_with(API_KEY)
    }
}

fn asaas_error(status: u16, code: &str, description: &str) -> Response {
    let status = StatusCode::from_u16(status).expect("status");
    (status, Json(json!({ "errors": [{ "code": code, "description": description }] }))).into_response()
}

/// What a handler does after [`begin`].
enum Step {
    /// Act, then answer (after the client gave up, when `hang`).
    Act { hang: bool },
    /// Answer this instead of acting.
    Answer(Response),
}

/// Records the request, checks the key and takes the route's next fault.
async fn begin(inner: &Shared, route: Route, headers: &HeaderMap) -> Step {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
    let fault = {
        let mut inner = locked(inner);
        let access_token = header("access_token");
        inner.seen.push(Seen { route, access_token: access_token.clone(), user_agent: header("user-agent") });
        if access_token.as_deref() != Some(API_KEY) {
            return Step::Answer(StatusCode::UNAUTHORIZED.into_response());
        }
        inner.faults.get_mut(&route).and_then(VecDeque::pop_front)
    };
    match fault {
        Some(Fault::Respond(status, body)) => {
            Step::Answer((StatusCode::from_u16(status).expect("status"), Json(body)).into_response())
        }
        Some(Fault::ActThenHang) => Step::Act { hang: true },
        Some(Fault::Hold(gate)) => {
            gate.notified().await;
            Step::Act { hang: false }
        }
        None => Step::Act { hang: false },
    }
}

async fn answer(hang: bool, response: Response) -> Response {
    if hang {
        tokio::time::sleep(HANG).await;
    }
    response
}

fn page(data: Vec<Value>) -> Response {
    let count = data.len();
    Json(json!({ "object": "list", "hasMore": false, "totalCount": count, "limit": 10, "offset": 0, "data": data }))
        .into_response()
}

async fn list_customers(
    State(inner): State<Shared>,
    headers: HeaderMap,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let hang = match begin(&inner, Route::ListCustomers, &headers).await {
        Step::Act { hang } => hang,
        Step::Answer(response) => return response,
    };
    let reference = query.get("externalReference").cloned();
    let found: Vec<Value> = locked(&inner)
        .customers
        .iter()
        .filter(|c| reference.is_none() || c["externalReference"].as_str() == reference.as_deref())
        .cloned()
        .collect();
    answer(hang, page(found)).await
}

async fn create_customer(State(inner): State<Shared>, headers: HeaderMap, Json(body): Json<Value>) -> Response {
    let hang = match begin(&inner, Route::CreateCustomer, &headers).await {
        Step::Act { hang } => hang,
        Step::Answer(response) => return response,
    };
    if body["name"].as_str().is_none_or(str::is_empty) {
        return asaas_error(400, "invalid_name", "O campo nome deve ser informado.");
    }
    if let Some(refusal) = check_cpf_cnpj(&body["cpfCnpj"]) {
        return refusal;
    }
    let customer = {
        let mut inner = locked(&inner);
        let mut customer = body.clone();
        customer["object"] = json!("customer");
        customer["id"] = json!(format!("cus_{:012}", inner.customers.len() + 1));
        customer["deleted"] = json!(false);
        inner.customers.push(customer.clone());
        customer
    };
    answer(hang, Json(customer).into_response()).await
}

async fn update_customer(
    State(inner): State<Shared>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Json(body): Json<Value>,
) -> Response {
    let hang = match begin(&inner, Route::UpdateCustomer, &headers).await {
        Step::Act { hang } => hang,
        Step::Answer(response) => return response,
    };
    if body.get("cpfCnpj").is_some()
        && let Some(refusal) = check_cpf_cnpj(&body["cpfCnpj"])
    {
        return refusal;
    }
    let updated = {
        let mut inner = locked(&inner);
        let Some(customer) = inner.customers.iter_mut().find(|c| c["id"] == id.as_str()) else {
            return asaas_error(404, "not_found", "Cliente não encontrado.");
        };
        for (k, v) in body.as_object().into_iter().flatten() {
            customer[k] = v.clone();
        }
        customer.clone()
    };
    answer(hang, Json(updated).into_response()).await
}

/// Asaas's answer to a missing or invalid `cpfCnpj`, if it is one: digits only (a CNPJ may have
/// letters before its two check digits, the format in force since July 2026), with the
/// Receita Federal's modulo-11 check digits.
fn check_cpf_cnpj(value: &Value) -> Option<Response> {
    let Some(raw) = value.as_str().filter(|v| !v.is_empty()) else {
        return Some(asaas_error(400, "invalid_cpfCnpj", "O campo CPF/CNPJ deve ser informado."));
    };
    let chars: Vec<char> = raw.chars().collect();
    let weights = |len: usize| -> Vec<u32> { (0..len).map(|i| 2 + ((len - 1 - i) % 8) as u32).collect() };
    let digit = |body: &[char]| -> Option<char> {
        let sum: u32 = body
            .iter()
            .zip(weights(body.len()))
            .map(|(c, w)| (*c as u32).checked_sub(48).map(|v| v * w))
            .sum::<Option<u32>>()?;
        char::from_digit(if sum % 11 < 2 { 0 } else { 11 - sum % 11 }, 10)
    };
    let shape = match chars.len() {
        11 => chars.iter().all(char::is_ascii_digit),
        14 => {
            chars[..12].iter().all(|c| c.is_ascii_digit() || c.is_ascii_uppercase())
                && chars[12..].iter().all(char::is_ascii_digit)
        }
        _ => false,
    };
    let n = chars.len();
    let cpf = n == 11;
    // A CPF's weights run 10..2 and 11..2; a CNPJ's cycle 2..9 from the right.
    let check = |body: &[char]| if cpf { cpf_digit(body) } else { digit(body) };
    let valid = shape
        && chars.iter().any(|c| *c != chars[0])
        && check(&chars[..n - 2]) == Some(chars[n - 2])
        && check(&chars[..n - 1]) == Some(chars[n - 1]);
    (!valid).then(|| asaas_error(400, "invalid_cpfCnpj", "O CPF/CNPJ informado é inválido."))
}

fn cpf_digit(body: &[char]) -> Option<char> {
    let sum: u32 =
        body.iter().rev().enumerate().map(|(i, c)| c.to_digit(10).map(|d| d * (i as u32 + 2))).sum::<Option<u32>>()?;
    char::from_digit(if sum % 11 < 2 { 0 } else { 11 - sum % 11 }, 10)
}

async fn list_payments(
    State(inner): State<Shared>,
    headers: HeaderMap,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let hang = match begin(&inner, Route::ListPayments, &headers).await {
        Step::Act { hang } => hang,
        Step::Answer(response) => return response,
    };
    let reference = query.get("externalReference").cloned();
    // Asaas leaves deleted payments out of its lists.
    let found: Vec<Value> = locked(&inner)
        .payments
        .iter()
        .filter(|p| p["deleted"] == false)
        .filter(|p| reference.is_none() || p["externalReference"].as_str() == reference.as_deref())
        .cloned()
        .collect();
    answer(hang, page(found)).await
}

async fn create_payment(State(inner): State<Shared>, headers: HeaderMap, Json(body): Json<Value>) -> Response {
    let hang = match begin(&inner, Route::CreatePayment, &headers).await {
        Step::Act { hang } => hang,
        Step::Answer(response) => return response,
    };
    let customer =
        body["customer"].as_str().and_then(|id| locked(&inner).customers.iter().find(|c| c["id"] == id).cloned());
    let Some(customer) = customer else {
        return asaas_error(400, "invalid_customer", "Cliente inválido ou não informado.");
    };
    if customer["cpfCnpj"].as_str().is_none_or(str::is_empty) {
        let message = "Para criar esta cobrança é necessário preencher o CPF ou CNPJ do cliente.";
        return asaas_error(400, "invalid_customer.cpfCnpj", message);
    }
    if body["billingType"] != "PIX" {
        return asaas_error(400, "invalid_billingType", "Forma de pagamento inválida.");
    }
    let Some(value) = body["value"].as_f64().filter(|v| *v > 0.0) else {
        return asaas_error(400, "invalid_value", "O valor da cobrança deve ser maior que zero.");
    };
    let due = body["dueDate"].as_str().and_then(|d| NaiveDate::parse_from_str(d, "%Y-%m-%d").ok());
    // Asaas keeps Brasília's calendar (UTC-3): from 21:00 there, UTC is already on the next day.
    let today = (Utc::now() - chrono::TimeDelta::hours(3)).date_naive();
    if due.is_none_or(|d| d < today) {
        return asaas_error(400, "invalid_dueDate", "A data de vencimento não pode ser anterior à data atual.");
    }
    let payment = {
        let mut inner = locked(&inner);
        let n = inner.payments.len() as u64 + 1;
        let id = format!("pay_{n:012}");
        let code = brcode("ASAAS", n, Cents((value * 100.0).round() as i64));
        inner.codes.insert(id.clone(), code);
        let payment = json!({
            "object": "payment", "id": id, "customer": body["customer"], "value": value,
            "billingType": "PIX", "status": "PENDING", "dueDate": body["dueDate"],
            "description": body["description"], "externalReference": body["externalReference"],
            "deleted": false, "pixTransaction": null, "refunds": null,
        });
        inner.payments.push(payment.clone());
        payment
    };
    answer(hang, Json(payment).into_response()).await
}

fn not_found() -> Response {
    asaas_error(404, "not_found", "Cobrança não encontrada.")
}

async fn get_payment(State(inner): State<Shared>, headers: HeaderMap, Path(id): Path<String>) -> Response {
    let hang = match begin(&inner, Route::GetPayment, &headers).await {
        Step::Act { hang } => hang,
        Step::Answer(response) => return response,
    };
    let payment = locked(&inner).payments.iter().find(|p| p["id"] == id.as_str()).cloned();
    answer(hang, payment.map_or_else(not_found, |p| Json(p).into_response())).await
}

/// `DELETE /v3/payments/{id}`: `{"deleted": true, "id": …}`; a received payment cannot be
/// removed.
async fn delete_payment(State(inner): State<Shared>, headers: HeaderMap, Path(id): Path<String>) -> Response {
    let hang = match begin(&inner, Route::DeletePayment, &headers).await {
        Step::Act { hang } => hang,
        Step::Answer(response) => return response,
    };
    let response = {
        let mut inner = locked(&inner);
        match inner.payments.iter_mut().find(|p| p["id"] == id.as_str() && p["deleted"] == false) {
            None => not_found(),
            Some(p) if matches!(p["status"].as_str(), Some("RECEIVED" | "CONFIRMED" | "RECEIVED_IN_CASH")) => {
                asaas_error(400, "invalid_action", "Não é possível remover uma cobrança já recebida.")
            }
            Some(p) => {
                p["deleted"] = json!(true);
                Json(json!({ "deleted": true, "id": id })).into_response()
            }
        }
    };
    answer(hang, response).await
}

async fn pix_qr_code(State(inner): State<Shared>, headers: HeaderMap, Path(id): Path<String>) -> Response {
    let hang = match begin(&inner, Route::PixQrCode, &headers).await {
        Step::Act { hang } => hang,
        Step::Answer(response) => return response,
    };
    let code = locked(&inner).codes.get(&id).cloned();
    let response = match code {
        Some(payload) => Json(json!({
            "encodedImage": "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==",
            "payload": payload,
            "expirationDate": "2031-01-01 23:59:59",
        }))
        .into_response(),
        None => not_found(),
    };
    answer(hang, response).await
}
