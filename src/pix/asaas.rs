//! Asaas (`{base_url}/v3`, header `access_token`): a customer found or created by phone, then a
//! `PIX` payment, then its QR code (`GET /v3/payments/{id}/pixQrCode`, `payload` = copia e cola).
//!
//! Asaas documents no idempotency header. What stands in for one:
//! - the payment's `externalReference` is the charge's txid, a digest of the ledger key that the
//!   caller derives and stores before the first call (Asaas documents no length limit for the
//!   field; 25 hex digits fit any, and the key's own text stays out of the merchant's panel);
//! - `find` is `GET /v3/payments?externalReference=<txid>`, and `create` runs the same lookup
//!   before posting, so a repeated `create` returns the existing payment;
//! - after [`GatewayError::Unknown`] the caller calls `find` before `create`. That, plus the
//!   caller's lease that keeps two attempts of one key from running at once, is what makes the
//!   charge exactly-once: Asaas does not enforce `externalReference` uniqueness, so two
//!   concurrent creates for one key could both post (this is Asaas's own advice: "consulte o
//!   resultado da tentativa anterior antes de criar novamente");
//! - a lease does not stop a worker frozen past it from posting when it wakes, after another
//!   attempt's lookup found nothing (the fault campaign found exactly that: two payments for
//!   one charge). So the payment is posted only while the request's send window is open;
//! - nor does a timeout stop Asaas: a create we gave up on may still be made a while later,
//!   and a retry's lookup a second after would find nothing and post a second one. So
//!   [`PixGateway::late_create_window`] is the client's timeout plus `[pix]
//!   lookup_margin_seconds` (30 by default), and an attempt that took over from a running or
//!   unknown one waits that long past the moment its predecessor could last have sent before it
//!   trusts a lookup that finds nothing. A create slower than that margin is the remaining
//!   risk, which the margin is the operator's lever on.
//!
//! Customers: Asaas lists customers by `externalReference` (no phone filter is documented), so
//! ours carry `wa:<phone match key>` (a Brazilian mobile without its ninth digit, so one person
//! is one customer however the number was written). A race can leave two customers for one phone: harmless. They
//! are created with `notificationDisabled`, so Asaas sends no e-mail or SMS of its own: the
//! customer hears from us on WhatsApp. Asaas documents `cpfCnpj` as required for a customer, and
//! accounts that enforce it refuse a payment for a customer without one ("é necessário preencher
//! o CPF ou CNPJ do cliente"), so a charge always carries the payer's document: the customer is
//! created with it, updated (`PUT /v3/customers/{id}`) when the one we hold differs, and a
//! request without one is refused before anything is sent.
//!
//! Webhooks carry the token configured in Asaas in the `asaas-access-token` header, compared in
//! constant time with the secret `webhook_secret_env` names; every `PAYMENT_*` event (the refund
//! ones `PAYMENT_REFUNDED`, `PAYMENT_PARTIALLY_REFUNDED`, `PAYMENT_REFUND_IN_PROGRESS` included)
//! names its payment, keyed by Asaas's event id. Payment states: `RECEIVED` and `CONFIRMED` are
//! paid (for Pix both mean the money arrived; Asaas's payment object names its Pix transaction
//! by an Asaas id, not the end-to-end id, so none is reported), and so are `REFUNDED`,
//! `REFUND_REQUESTED` and `REFUND_IN_PROGRESS` (the money was received; refunds are tracked on
//! their own), `PENDING` and `AWAITING_RISK_ANALYSIS` pending, `OVERDUE` expired, deleted ones
//! cancelled.
//!
//! Refunds (`POST /v3/payments/{id}/refund`, our refund's id in its description) are in the
//! `refunds` module.

mod refunds;

use std::time::Duration;

use chrono::{DateTime, Utc};
use chrono_tz::America::Sao_Paulo;
use reqwest::Url;
use reqwest::header::HeaderValue;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use subtle::ConstantTimeEq;

use super::gateway::{
    CancelOutcome, ChargeRef, ChargeRequest, CreatedCharge, GatewayError, Notification, NotificationError,
    NotifiedCharge, Payer, PaymentState, PixGateway, WebhookRequest, after_refused_cancel,
};
use super::gateway::{RefundReceipt, RefundRequest};
use super::http;
use super::secrets::{Secrets, required_secret};
use super::settings::PixSettings;
use crate::domain::{PayerDocument, Secret};

pub const DEFAULT_BASE_URL: &str = "https://api.asaas.com";
const PROVIDER: &str = "Asaas";
const API_VERSION: &str = "v3";
/// The payment description's documented maximum.
const MAX_DESCRIPTION_CHARS: usize = 500;
/// Enough for any name a WhatsApp profile carries.
const MAX_NAME_CHARS: usize = 100;
const WEBHOOK_TOKEN_HEADER: &str = "asaas-access-token";

pub struct AsaasGateway {
    http: reqwest::Client,
    timeout: Duration,
    lookup_margin: Duration,
    base: Url,
    /// Marked sensitive: never printed by `Debug`.
    api_key: HeaderValue,
    webhook_token: Option<Secret>,
}

impl AsaasGateway {
    /// The key comes from `api_key_env`; the webhook token (optional: without it every
    /// notification is refused) from `webhook_secret_env`.
    pub fn new(settings: &PixSettings, secrets: &dyn Secrets) -> Result<Self, GatewayError> {
        let provider = &settings.provider;
        let key = required_secret(secrets, "api_key_env", provider.api_key_env.as_deref())?;
        let mut api_key = HeaderValue::from_str(key.expose().trim()).map_err(|_| {
            GatewayError::NotConfigured("the Asaas API key has characters an HTTP header cannot carry".into())
        })?;
        api_key.set_sensitive(true);
        let webhook_token = provider.webhook_secret_env.as_deref().and_then(|name| secrets.get(name));
        // The reference writes the base URL with `/v3`; the paths add it, so one written
        // either way works.
        let raw = provider.base_url.as_deref().unwrap_or(DEFAULT_BASE_URL).trim().trim_end_matches('/');
        let base = http::base_url(raw.strip_suffix("/v3").unwrap_or(raw))?;
        let timeout = settings.provider.timeout.unwrap_or(http::DEFAULT_TIMEOUT);
        let lookup_margin = settings.provider.lookup_margin;
        Ok(Self { http: http::client(timeout)?, timeout, lookup_margin, base, api_key, webhook_token })
    }

    /// The same gateway with another request timeout.
    pub fn with_timeout(mut self, timeout: Duration) -> Result<Self, GatewayError> {
        self.http = http::client(timeout)?;
        self.timeout = timeout;
        Ok(self)
    }

    fn url(&self, path: &[&str], query: &[(&str, &str)]) -> Result<Url, GatewayError> {
        let segments: Vec<&str> = std::iter::once(API_VERSION).chain(path.iter().copied()).collect();
        http::url(&self.base, &segments, query)
    }

    async fn get<T: DeserializeOwned>(&self, path: &[&str], query: &[(&str, &str)]) -> Result<T, GatewayError> {
        let request = self.http.get(self.url(path, query)?).header("access_token", self.api_key.clone());
        http::send_json(PROVIDER, request, readable_error).await
    }

    async fn post<T: DeserializeOwned>(&self, path: &[&str], body: &Value) -> Result<T, GatewayError> {
        let request = self.http.post(self.url(path, &[])?).header("access_token", self.api_key.clone()).json(body);
        http::send_json(PROVIDER, request, readable_error).await
    }

    async fn put<T: DeserializeOwned>(&self, path: &[&str], body: &Value) -> Result<T, GatewayError> {
        let request = self.http.put(self.url(path, &[])?).header("access_token", self.api_key.clone()).json(body);
        http::send_json(PROVIDER, request, readable_error).await
    }

    /// The live payment whose `externalReference` is `reference`, if any.
    async fn payment_by_reference(&self, reference: &str) -> Result<Option<Payment>, GatewayError> {
        let page: Page<Payment> = self.get(&["payments"], &[("externalReference", reference)]).await?;
        Ok(page.data.into_iter().find(|p| !p.deleted))
    }

    /// The charge's payment: by its id, or by `externalReference` when none was recorded.
    async fn payment_of(&self, charge: &ChargeRef) -> Result<Payment, GatewayError> {
        match &charge.provider_ref {
            Some(id) => self.get(&["payments", id], &[]).await,
            None => self.payment_by_reference(&charge.txid).await?.ok_or_else(|| {
                GatewayError::Rejected(format!("Asaas has no payment with externalReference {}", charge.txid))
            }),
        }
    }

    /// The payer's customer, created with its CPF/CNPJ, or updated when the document changed.
    async fn customer(&self, payer: &Payer, document: &PayerDocument) -> Result<String, GatewayError> {
        let reference = format!("wa:{}", payer.phone.match_key());
        let page: Page<Customer> = self.get(&["customers"], &[("externalReference", &reference)]).await?;
        if let Some(found) = page.data.into_iter().find(|c| !c.deleted) {
            if found.cpf_cnpj.as_deref() != Some(document.as_str()) {
                let _: Customer = self.put(&["customers", &found.id], &json!({ "cpfCnpj": document.as_str() })).await?;
            }
            return Ok(found.id);
        }
        let name = payer.name.as_deref().map(str::trim).filter(|n| !n.is_empty()).unwrap_or(payer.phone.as_str());
        let body = json!({
            "name": cut(name, MAX_NAME_CHARS),
            "cpfCnpj": document.as_str(),
            "mobilePhone": mobile_phone(payer),
            "externalReference": reference,
            "notificationDisabled": true,
        });
        let created: Customer = self.post(&["customers"], &body).await?;
        Ok(created.id)
    }

    /// The charge as the caller records it: the payment and its QR code.
    async fn charge(&self, req: &ChargeRequest, payment: Payment) -> Result<CreatedCharge, GatewayError> {
        let qr: PixQrCode = self.get(&["payments", &payment.id, "pixQrCode"], &[]).await?;
        Ok(CreatedCharge {
            txid: req.txid.clone(),
            copia_e_cola: qr.payload,
            provider_ref: Some(payment.id),
            expires_at: req.expires_at,
        })
    }
}

#[async_trait::async_trait]
impl PixGateway for AsaasGateway {
    fn name(&self) -> &'static str {
        "asaas"
    }

    async fn create(&self, req: &ChargeRequest) -> Result<CreatedCharge, GatewayError> {
        let value = http::reais(req.amount)?;
        if let Some(existing) = self.payment_by_reference(req.txid.as_str()).await? {
            return self.charge(req, existing).await;
        }
        // Asaas documents `cpfCnpj` as required for a customer, and accounts that enforce it
        // refuse the payment without it: the caller asks for it before proposing the charge.
        let document =
            req.payer.document.as_ref().ok_or_else(|| {
                GatewayError::Rejected("Asaas needs the payer's CPF or CNPJ to create the charge".into())
            })?;
        let customer = self.customer(&req.payer, document).await?;
        let body = json!({
            "customer": customer,
            "billingType": "PIX",
            "value": value,
            "dueDate": due_date(req.expires_at),
            "description": cut(&req.description, MAX_DESCRIPTION_CHARS),
            "externalReference": req.txid.as_str(),
        });
        // Checked last, right before the one request a frozen worker must not send late.
        if !req.window.is_open() {
            return Err(GatewayError::WindowClosed);
        }
        let payment: Payment = self.post(&["payments"], &body).await?;
        self.charge(req, payment).await
    }

    fn late_create_window(&self) -> Option<Duration> {
        Some(self.timeout + self.lookup_margin)
    }

    async fn find(&self, req: &ChargeRequest) -> Result<Option<CreatedCharge>, GatewayError> {
        match self.payment_by_reference(req.txid.as_str()).await? {
            Some(payment) => self.charge(req, payment).await.map(Some),
            None => Ok(None),
        }
    }

    async fn state(&self, charge: &ChargeRef) -> Result<PaymentState, GatewayError> {
        payment_state(&self.payment_of(charge).await?)
    }

    /// `POST /v3/payments/{id}/refund`, after a lookup of the refund by its marker (see the
    /// `refunds` module).
    async fn refund(&self, req: &RefundRequest) -> Result<RefundReceipt, GatewayError> {
        self.request_refund(req).await
    }

    /// The payment's `refunds`, searched for the refund's marker.
    async fn find_refund(&self, req: &RefundRequest) -> Result<Option<RefundReceipt>, GatewayError> {
        self.lookup_refund(req).await
    }

    /// `DELETE /v3/payments/{id}`; Asaas refuses to remove a payment it received.
    async fn cancel(&self, charge: &ChargeRef) -> Result<CancelOutcome, GatewayError> {
        let id = match &charge.provider_ref {
            Some(id) => id.clone(),
            None => match self.payment_by_reference(&charge.txid).await? {
                Some(payment) => payment.id,
                // Not listed: never created, or deleted already.
                None => return Ok(CancelOutcome::Cancelled),
            },
        };
        let request = self.http.delete(self.url(&["payments", &id], &[])?).header("access_token", self.api_key.clone());
        match http::send_json::<Value>(PROVIDER, request, readable_error).await {
            Ok(_) => Ok(CancelOutcome::Cancelled),
            Err(refusal @ GatewayError::Rejected(_)) => after_refused_cancel(self, charge, refusal).await,
            Err(e) => Err(e),
        }
    }

    fn notifications(&self, request: &WebhookRequest<'_>) -> Result<Vec<Notification>, NotificationError> {
        let expected = self.webhook_token.as_ref().ok_or(NotificationError::Unauthenticated)?;
        let given = request.headers.get(WEBHOOK_TOKEN_HEADER).ok_or(NotificationError::Unauthenticated)?;
        if !bool::from(given.as_bytes().ct_eq(expected.expose().as_bytes())) {
            return Err(NotificationError::Unauthenticated);
        }
        read_event(request.body)
    }
}

#[derive(Deserialize)]
struct Page<T> {
    #[serde(default = "Vec::new")]
    data: Vec<T>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Customer {
    id: String,
    #[serde(default)]
    deleted: bool,
    #[serde(default)]
    cpf_cnpj: Option<String>,
}

#[derive(Deserialize)]
struct Payment {
    id: String,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    deleted: bool,
    /// Kept raw and read entry by entry (the `refunds` module): a refund entry we cannot read
    /// never hides the payment's state.
    #[serde(default)]
    refunds: Option<Value>,
}

#[derive(Deserialize)]
struct PixQrCode {
    payload: String,
}

#[derive(Deserialize)]
struct Event {
    id: String,
    event: String,
    #[serde(default)]
    payment: Option<EventPayment>,
}

#[derive(Deserialize)]
struct EventPayment {
    id: String,
}

/// Asaas's `{"errors":[{"code":…,"description":…}]}`: the descriptions, which are meant for people.
fn readable_error(body: &Value) -> Option<String> {
    let descriptions: Vec<&str> = body
        .get("errors")?
        .as_array()?
        .iter()
        .filter_map(|e| e.get("description").and_then(Value::as_str))
        .filter(|d| !d.trim().is_empty())
        .collect();
    (!descriptions.is_empty()).then(|| descriptions.join("; "))
}

fn payment_state(payment: &Payment) -> Result<PaymentState, GatewayError> {
    if payment.deleted {
        return Ok(PaymentState::Cancelled);
    }
    match payment.status.as_deref().unwrap_or_default() {
        "RECEIVED" | "CONFIRMED" | "RECEIVED_IN_CASH" => Ok(PaymentState::Paid { end_to_end_id: None }),
        // The money was received; the refund is tracked on its own.
        "REFUNDED" | "REFUND_REQUESTED" | "REFUND_IN_PROGRESS" => Ok(PaymentState::Paid { end_to_end_id: None }),
        "PENDING" | "AWAITING_RISK_ANALYSIS" => Ok(PaymentState::Pending),
        "OVERDUE" => Ok(PaymentState::Expired),
        "DELETED" => Ok(PaymentState::Cancelled),
        other => {
            Err(GatewayError::Unknown(format!("Asaas payment {} has a status we do not know: {other:?}", payment.id)))
        }
    }
}

/// Reads an Asaas answer to a payment lookup (`GET /v3/payments/{id}`) as the gateway does:
/// the payment's state, or the error the answer stands for. Public for the fuzz targets;
/// never panics.
pub fn read_payment(status: reqwest::StatusCode, body: &[u8]) -> Result<PaymentState, GatewayError> {
    let payment: Payment = http::read_json(PROVIDER, status, body, readable_error)?;
    payment_state(&payment)
}

/// The events of a notification whose token was checked: one per payment event, none for the
/// rest (Asaas sends account, transfer and other events to the same URL). Public for the fuzz
/// targets; never panics.
pub fn read_event(body: &[u8]) -> Result<Vec<Notification>, NotificationError> {
    let event: Event = serde_json::from_slice(body).map_err(|e| NotificationError::Malformed(e.to_string()))?;
    if event.id.trim().is_empty() {
        return Err(NotificationError::Malformed("the event has an empty id".into()));
    }
    if !event.event.starts_with("PAYMENT_") {
        return Ok(Vec::new());
    }
    let payment = event
        .payment
        .filter(|p| !p.id.trim().is_empty())
        .ok_or_else(|| NotificationError::Malformed(format!("{} without its payment id", event.event)))?;
    Ok(vec![Notification { event_id: event.id, charge: NotifiedCharge::ProviderRef(payment.id) }])
}

/// The charge's last day, in Brasília time: the payment turns `OVERDUE` after it.
fn due_date(expires_at: DateTime<Utc>) -> String {
    expires_at.with_timezone(&Sao_Paulo).date_naive().format("%Y-%m-%d").to_string()
}

/// Asaas writes Brazilian mobiles without the country code (`47999376637`).
fn mobile_phone(payer: &Payer) -> &str {
    let digits = payer.phone.digits();
    digits.strip_prefix("55").unwrap_or(digits)
}

fn cut(text: &str, max_chars: usize) -> String {
    text.trim().chars().take(max_chars).collect()
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;
    use crate::domain::PhoneE164;

    #[test]
    fn the_due_date_is_the_day_in_brasilia() {
        assert_eq!(due_date(Utc.with_ymd_and_hms(2030, 1, 2, 2, 0, 0).unwrap()), "2030-01-01");
        assert_eq!(due_date(Utc.with_ymd_and_hms(2030, 1, 2, 3, 0, 0).unwrap()), "2030-01-02");
    }

    #[test]
    fn brazilian_mobiles_lose_the_country_code() {
        let payer = |p: &str| Payer { phone: PhoneE164::parse(p).unwrap(), name: None, document: None };
        assert_eq!(mobile_phone(&payer("+5547999376637")), "47999376637");
        assert_eq!(mobile_phone(&payer("+16505551234")), "16505551234");
    }

    #[test]
    fn statuses_map_to_states() {
        let state = |status: &str, deleted: bool| {
            payment_state(&Payment { id: "pay_1".into(), status: Some(status.into()), deleted, refunds: None })
        };
        assert_eq!(state("RECEIVED", false).unwrap(), PaymentState::Paid { end_to_end_id: None });
        assert_eq!(state("CONFIRMED", false).unwrap(), PaymentState::Paid { end_to_end_id: None });
        assert_eq!(state("PENDING", false).unwrap(), PaymentState::Pending);
        assert_eq!(state("OVERDUE", false).unwrap(), PaymentState::Expired);
        for refunded in ["REFUNDED", "REFUND_REQUESTED", "REFUND_IN_PROGRESS"] {
            assert_eq!(state(refunded, false).unwrap(), PaymentState::Paid { end_to_end_id: None }, "{refunded}");
        }
        assert_eq!(state("DELETED", false).unwrap(), PaymentState::Cancelled);
        assert_eq!(state("PENDING", true).unwrap(), PaymentState::Cancelled);
        assert!(matches!(state("SOMETHING_NEW", false), Err(GatewayError::Unknown(m)) if m.contains("SOMETHING_NEW")));
    }

    #[test]
    fn error_bodies_give_their_descriptions() {
        let body = json!({ "errors": [
            { "code": "invalid_value", "description": "O valor deve ser maior que zero." },
            { "code": "invalid_dueDate", "description": "Data inválida." },
        ]});
        assert_eq!(readable_error(&body).as_deref(), Some("O valor deve ser maior que zero.; Data inválida."));
        assert_eq!(readable_error(&json!({ "errors": [] })), None);
        assert_eq!(readable_error(&Value::Null), None);
    }

    #[test]
    fn events_name_their_payment_and_other_events_are_skipped() {
        let body = br#"{ "id": "evt_05b708f961d739ea7eba7e4db318f621&368604920", "event": "PAYMENT_RECEIVED",
            "dateCreated": "2024-06-12 16:45:03", "payment": { "object": "payment", "id": "pay_080225913252" } }"#;
        assert_eq!(
            read_event(body).unwrap(),
            vec![Notification {
                event_id: "evt_05b708f961d739ea7eba7e4db318f621&368604920".into(),
                charge: NotifiedCharge::ProviderRef("pay_080225913252".into()),
            }]
        );
        assert_eq!(read_event(br#"{ "id": "evt_1", "event": "TRANSFER_DONE", "transfer": {} }"#).unwrap(), vec![]);
        for refund in ["PAYMENT_REFUNDED", "PAYMENT_PARTIALLY_REFUNDED", "PAYMENT_REFUND_IN_PROGRESS"] {
            let body = format!(
                r#"{{ "id": "evt_r", "event": "{refund}", "payment": {{ "id": "pay_1", "status": "RECEIVED" }} }}"#
            );
            let expected =
                Notification { event_id: "evt_r".into(), charge: NotifiedCharge::ProviderRef("pay_1".into()) };
            assert_eq!(read_event(body.as_bytes()).unwrap(), vec![expected], "{refund}");
        }
        for bad in
            [&b"not json"[..], br#"{ "event": "PAYMENT_RECEIVED" }"#, br#"{ "id": "e", "event": "PAYMENT_RECEIVED" }"#]
        {
            assert!(
                matches!(read_event(bad), Err(NotificationError::Malformed(_))),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
