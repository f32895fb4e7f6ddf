//! Mercado Pago (`POST /v1/payments` with `payment_method_id: "pix"`, `Authorization: Bearer`).
//!
//! Idempotency: every create carries `X-Idempotency-Key`, a UUID derived from the ledger key
//! (SHA-256, shaped as a version-4 UUID as Mercado Pago asks), so any retry of one key sends
//! the same value and Mercado Pago answers with the payment already created (a `409` while the
//! first request with that key is still being processed is an unknown outcome, looked up and
//! retried, never a refusal). `find` is a real
//! lookup, `GET /v1/payments/search?external_reference=<txid>`; the search index may lag a
//! fresh payment, and then the caller's create after an empty `find` is still safe because of
//! the key. `external_reference` is the charge's txid (a digest of the ledger key that the
//! caller stores), so `state` can find a charge that has no provider id recorded.
//!
//! The payer's e-mail: Mercado Pago requires `payer.email` and documents no placeholder, so it
//! is the tenant's `[pix] payer_email` setting: either one address (`pagamentos@loja.com.br`),
//! or `@domain`, which gives each customer `<phone digits>@domain` (the digits in their
//! canonical form, so a customer is one payer with or without the ninth digit). A gateway is
//! not built without it (the variable `<api_key_env>_PAYER_EMAIL` read before the setting
//! existed still works, with a warning). It must differ from the collector account's own
//! e-mail.
//!
//! Expiry: `date_of_expiration` is the request's `expires_at`, kept within the 30 minutes to
//! 30 days Mercado Pago allows, written in Brasília time.
//!
//! Notifications: `x-signature: ts=<unix>,v1=<hex>` is HMAC-SHA256, with the webhook secret,
//! of `id:<data.id>;request-id:<x-request-id>;ts:<ts>;` (a part whose value is absent is left
//! out, as Mercado Pago documents), compared in constant time. `data.id` comes from the query
//! string when present, else from the body, as sent (not lower-cased: Pix payment ids are
//! digits). The event id is the body's `id`, else `<data.id>:<x-request-id>`. The timestamp is
//! not checked for freshness: a replayed notification only makes the caller ask for the state
//! again. A refund changes the payment, so its notification is a payment one with a new id.
//! States: `approved` is paid (no end-to-end id is documented on the payment), and so is
//! `refunded` (the money was received; refunds are tracked on their own), `pending`,
//! `in_process` and `authorized` pending, `cancelled` with `status_detail: expired` expired,
//! other `cancelled`, `rejected` and `charged_back` cancelled.
//!
//! Refunds (`POST /v1/payments/{id}/refunds`, keyed by the refund's id) are in the `refund`
//! module.

mod notify;
pub(crate) mod payer;
mod refund;

use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use chrono_tz::America::Sao_Paulo;
use reqwest::Url;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

pub use self::payer::PayerEmail;
use crate::domain::{LedgerKey, Secret};
use crate::pix::gateway::{
    CancelOutcome, ChargeRef, ChargeRequest, CreatedCharge, GatewayError, Notification, NotificationError,
    PaymentState, PixGateway, WebhookRequest, after_refused_cancel,
};
use crate::pix::gateway::{RefundReceipt, RefundRequest};
use crate::pix::http;
use crate::pix::secrets::{Secrets, required_secret};
use crate::pix::settings::{PixSettings, ProviderConfig};

pub const DEFAULT_BASE_URL: &str = "https://api.mercadopago.com";
const PROVIDER: &str = "Mercado Pago";
/// Mercado Pago accepts a Pix expiry from 30 minutes to 30 days ahead; the margins keep a
/// request that takes a while to arrive inside the window.
const MIN_EXPIRY: TimeDelta = TimeDelta::minutes(31);
const MAX_EXPIRY: TimeDelta = TimeDelta::minutes(30 * 24 * 60 - 1);
/// Separates the idempotency key's derivation from any other hash of the ledger key.
const IDEMPOTENCY_DOMAIN: &[u8] = b"balcao/mercadopago/x-idempotency-key/v1\0";

/// Before `[pix] payer_email` existed the e-mail was read from `<api_key_env>_PAYER_EMAIL`: a
/// tenant still set up that way keeps working, with a warning to move it to the file.
fn legacy_payer_email(provider: &ProviderConfig, secrets: &dyn Secrets) -> Result<PayerEmail, GatewayError> {
    let required = || {
        GatewayError::NotConfigured(
            "[pix] payer_email is required for gateway mercadopago: an address you own \
             (pagamentos@example.com.br), or @domain for <phone digits>@domain per customer"
                .to_owned(),
        )
    };
    let variable = format!("{}_PAYER_EMAIL", provider.api_key_env.as_deref().ok_or_else(required)?);
    let raw = secrets.get(&variable).ok_or_else(required)?;
    tracing::warn!(%variable, "the Mercado Pago payer e-mail comes from a variable; set [pix] payer_email instead");
    PayerEmail::parse(raw.expose()).map_err(|e| GatewayError::NotConfigured(format!("{variable}: {e}")))
}

pub struct MercadoPagoGateway {
    http: reqwest::Client,
    base: Url,
    token: Secret,
    webhook_secret: Option<Secret>,
    payer_email: PayerEmail,
}

impl MercadoPagoGateway {
    /// The access token comes from `api_key_env`, the payer e-mail from the settings, and the
    /// webhook secret (optional: without it every notification is refused) from
    /// `webhook_secret_env`.
    pub fn new(settings: &PixSettings, secrets: &dyn Secrets) -> Result<Self, GatewayError> {
        let provider = &settings.provider;
        let token = required_secret(secrets, "api_key_env", provider.api_key_env.as_deref())?;
        let payer_email = match provider.payer_email.clone() {
            Some(setting) => setting,
            None => legacy_payer_email(provider, secrets)?,
        };
        let webhook_secret = provider.webhook_secret_env.as_deref().and_then(|name| secrets.get(name));
        let base = http::base_url(provider.base_url.as_deref().unwrap_or(DEFAULT_BASE_URL))?;
        let timeout = provider.timeout.unwrap_or(http::DEFAULT_TIMEOUT);
        Ok(Self { http: http::client(timeout)?, base, token, webhook_secret, payer_email })
    }

    /// The same gateway with another request timeout.
    pub fn with_timeout(mut self, timeout: Duration) -> Result<Self, GatewayError> {
        self.http = http::client(timeout)?;
        Ok(self)
    }

    /// The same gateway with another payer e-mail setting.
    pub fn with_payer_email(mut self, payer_email: PayerEmail) -> Self {
        self.payer_email = payer_email;
        self
    }

    async fn get<T: DeserializeOwned>(&self, path: &[&str], query: &[(&str, &str)]) -> Result<T, GatewayError> {
        let request = self.http.get(http::url(&self.base, path, query)?).bearer_auth(self.token.expose());
        http::send_json(PROVIDER, request, readable_error).await
    }

    /// The newest payment whose `external_reference` is `reference`, in full.
    async fn payment_by_reference(&self, reference: &str) -> Result<Option<Payment>, GatewayError> {
        let query = [("external_reference", reference), ("sort", "date_created"), ("criteria", "desc")];
        let page: SearchPage = self.get(&["v1", "payments", "search"], &query).await?;
        match page.results.into_iter().next() {
            Some(found) if found.qr_code().is_some() => Ok(Some(found)),
            Some(found) => self.get(&["v1", "payments", &found.id], &[]).await.map(Some),
            None => Ok(None),
        }
    }
}

#[async_trait::async_trait]
impl PixGateway for MercadoPagoGateway {
    fn name(&self) -> &'static str {
        "mercadopago"
    }

    async fn create(&self, req: &ChargeRequest) -> Result<CreatedCharge, GatewayError> {
        let amount = http::reais(req.amount)?;
        let mut payer = json!({ "email": self.payer_email.for_payer(&req.payer) });
        if let Some(name) = req.payer.name.as_deref().map(str::trim).filter(|n| !n.is_empty()) {
            payer["first_name"] = json!(name);
        }
        if let Some(document) = &req.payer.document {
            payer["identification"] = json!({ "type": document.kind().as_str(), "number": document.as_str() });
        }
        let body = json!({
            "transaction_amount": amount,
            "description": req.description.trim(),
            "payment_method_id": "pix",
            "date_of_expiration": date_of_expiration(expiration(req.expires_at, Utc::now())),
            "external_reference": req.txid.as_str(),
            "payer": payer,
        });
        let request = self
            .http
            .post(http::url(&self.base, &["v1", "payments"], &[])?)
            .bearer_auth(self.token.expose())
            .header("X-Idempotency-Key", idempotency_key(&req.key))
            .json(&body);
        let payment: Payment = http::send_keyed_create(PROVIDER, request, readable_error).await?;
        created(req, payment)
    }

    async fn find(&self, req: &ChargeRequest) -> Result<Option<CreatedCharge>, GatewayError> {
        match self.payment_by_reference(req.txid.as_str()).await? {
            Some(payment) => created(req, payment).map(Some),
            None => Ok(None),
        }
    }

    async fn state(&self, charge: &ChargeRef) -> Result<PaymentState, GatewayError> {
        let payment = match &charge.provider_ref {
            Some(id) => self.get(&["v1", "payments", id], &[]).await?,
            None => self.payment_by_reference(&charge.txid).await?.ok_or_else(|| {
                GatewayError::Rejected(format!("Mercado Pago has no payment with external_reference {}", charge.txid))
            })?,
        };
        payment_state(&payment)
    }

    /// The keyed `POST /v1/payments/{id}/refunds` (see the `refund` module).
    async fn refund(&self, req: &RefundRequest) -> Result<RefundReceipt, GatewayError> {
        self.request_refund(req).await
    }

    /// `GET /v1/payments/{id}/refunds/{refund id}`, when the refund's id is known.
    async fn find_refund(&self, req: &RefundRequest) -> Result<Option<RefundReceipt>, GatewayError> {
        self.lookup_refund(req).await
    }

    /// `PUT /v1/payments/{id}` with `status: cancelled`; Mercado Pago refuses it for an approved
    /// payment.
    async fn cancel(&self, charge: &ChargeRef) -> Result<CancelOutcome, GatewayError> {
        let id = match &charge.provider_ref {
            Some(id) => id.clone(),
            None => match self.payment_by_reference(&charge.txid).await? {
                Some(payment) => payment.id,
                None => return Ok(CancelOutcome::Cancelled),
            },
        };
        let request = self
            .http
            .put(http::url(&self.base, &["v1", "payments", &id], &[])?)
            .bearer_auth(self.token.expose())
            .json(&json!({ "status": "cancelled" }));
        match http::send_json::<Payment>(PROVIDER, request, readable_error).await {
            Ok(payment) => match payment_state(&payment)? {
                PaymentState::Paid { end_to_end_id } => Ok(CancelOutcome::Paid { end_to_end_id }),
                _ => Ok(CancelOutcome::Cancelled),
            },
            Err(refusal @ GatewayError::Rejected(_)) => after_refused_cancel(self, charge, refusal).await,
            Err(e) => Err(e),
        }
    }

    fn notifications(&self, request: &WebhookRequest<'_>) -> Result<Vec<Notification>, NotificationError> {
        notify::read(self.webhook_secret.as_ref(), request)
    }
}

#[derive(Deserialize)]
struct SearchPage {
    #[serde(default = "Vec::new")]
    results: Vec<Payment>,
}

#[derive(Deserialize)]
struct Payment {
    #[serde(deserialize_with = "string_or_number")]
    id: String,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    status_detail: Option<String>,
    #[serde(default)]
    date_of_expiration: Option<String>,
    #[serde(default)]
    point_of_interaction: Option<Value>,
}

impl Payment {
    fn qr_code(&self) -> Option<&str> {
        self.point_of_interaction.as_ref()?.pointer("/transaction_data/qr_code")?.as_str().filter(|c| !c.is_empty())
    }
}

fn string_or_number<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    let value = Value::deserialize(deserializer)?;
    id_text(&value).ok_or_else(|| serde::de::Error::custom("an id must be a string or a number"))
}

fn id_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.trim().to_owned()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

fn created(req: &ChargeRequest, payment: Payment) -> Result<CreatedCharge, GatewayError> {
    let Some(code) = payment.qr_code() else {
        // Asking again returns the same payment: nothing a retry can fix.
        return Err(GatewayError::Rejected(format!(
            "Mercado Pago payment {} ({}, {}) has no Pix code",
            payment.id,
            payment.status.as_deref().unwrap_or("no status"),
            payment.status_detail.as_deref().unwrap_or("no detail"),
        )));
    };
    let expires_at = payment
        .date_of_expiration
        .as_deref()
        .and_then(|d| DateTime::parse_from_rfc3339(d).ok())
        .map_or(req.expires_at, |d| d.with_timezone(&Utc));
    Ok(CreatedCharge {
        txid: req.txid.clone(),
        copia_e_cola: code.to_owned(),
        provider_ref: Some(payment.id),
        expires_at,
    })
}

/// `message`, or the first cause's `description`, of Mercado Pago's error body.
fn readable_error(body: &Value) -> Option<String> {
    fn text(v: Option<&Value>) -> Option<&str> {
        v.and_then(Value::as_str).map(str::trim).filter(|s| !s.is_empty())
    }
    let cause = text(body.pointer("/cause/0/description"));
    match (text(body.get("message")), cause) {
        (Some(message), Some(cause)) if message != cause => Some(format!("{message}: {cause}")),
        (Some(message), _) => Some(message.to_owned()),
        (None, cause) => cause.map(str::to_owned),
    }
}

/// Reads a Mercado Pago answer to a payment lookup (`GET /v1/payments/{id}`) as the gateway
/// does: its state and, for `create` and `find`, its Pix code and expiry (against `req`), or
/// the error the answer stands for. Public for the fuzz targets; never panics.
pub fn read_payment(
    status: reqwest::StatusCode,
    body: &[u8],
    req: &ChargeRequest,
) -> Result<(PaymentState, Option<CreatedCharge>), GatewayError> {
    let payment: Payment = http::read_json(PROVIDER, status, body, readable_error)?;
    let state = payment_state(&payment)?;
    Ok((state, created(req, payment).ok()))
}

fn payment_state(payment: &Payment) -> Result<PaymentState, GatewayError> {
    let detail = payment.status_detail.as_deref().unwrap_or_default();
    match payment.status.as_deref().unwrap_or_default() {
        // A refunded payment was received first; the refund is tracked on its own.
        "approved" | "refunded" => Ok(PaymentState::Paid { end_to_end_id: None }),
        "pending" | "in_process" | "authorized" => Ok(PaymentState::Pending),
        "cancelled" if detail == "expired" => Ok(PaymentState::Expired),
        "cancelled" | "rejected" | "charged_back" => Ok(PaymentState::Cancelled),
        other => Err(GatewayError::Unknown(format!(
            "Mercado Pago payment {} has a status we do not know: {other:?} ({detail})",
            payment.id
        ))),
    }
}

/// The `X-Idempotency-Key` of a ledger key: the same on every retry, a UUID v4 in shape.
pub fn idempotency_key(key: &LedgerKey) -> String {
    let digest = Sha256::new().chain_update(IDEMPOTENCY_DOMAIN).chain_update(key.as_str().as_bytes()).finalize();
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    uuid::Builder::from_random_bytes(bytes).into_uuid().hyphenated().to_string()
}

/// `expires_at` moved into the window Mercado Pago accepts, counted from `now`.
fn expiration(expires_at: DateTime<Utc>, now: DateTime<Utc>) -> DateTime<Utc> {
    expires_at.clamp(now + MIN_EXPIRY, now + MAX_EXPIRY)
}

/// `2030-01-01T23:00:00.000-03:00`: Mercado Pago's `yyyy-MM-dd'T'HH:mm:ss.SSSz`.
fn date_of_expiration(at: DateTime<Utc>) -> String {
    at.with_timezone(&Sao_Paulo).format("%Y-%m-%dT%H:%M:%S%.3f%:z").to_string()
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;

    #[test]
    fn the_idempotency_key_is_a_stable_uuid_v4_per_ledger_key() {
        let key = |k: &str| idempotency_key(&LedgerKey::from_stored(k.into()));
        let first = key("charge/v1/abc");
        assert_eq!(first, key("charge/v1/abc"));
        assert_ne!(first, key("charge/v1/abd"));
        let parsed = uuid::Uuid::parse_str(&first).unwrap();
        assert_eq!(parsed.get_version_num(), 4);
        assert_eq!(parsed.hyphenated().to_string(), first);
    }

    #[test]
    fn the_expiry_stays_in_the_allowed_window_in_brasilia_time() {
        let now = Utc.with_ymd_and_hms(2030, 1, 1, 12, 0, 0).unwrap();
        let in_a_day = now + TimeDelta::days(1);
        assert_eq!(expiration(in_a_day, now), in_a_day);
        assert_eq!(expiration(now + TimeDelta::minutes(5), now), now + MIN_EXPIRY);
        assert_eq!(expiration(now + TimeDelta::days(90), now), now + MAX_EXPIRY);
        assert_eq!(date_of_expiration(in_a_day), "2030-01-02T09:00:00.000-03:00");
        assert!(DateTime::parse_from_rfc3339(&date_of_expiration(in_a_day)).is_ok());
    }

    #[test]
    fn statuses_map_to_states() {
        let state = |status: &str, detail: &str| {
            payment_state(&Payment {
                id: "1".into(),
                status: Some(status.into()),
                status_detail: Some(detail.into()),
                date_of_expiration: None,
                point_of_interaction: None,
            })
        };
        assert_eq!(state("approved", "accredited").unwrap(), PaymentState::Paid { end_to_end_id: None });
        assert_eq!(state("pending", "pending_waiting_transfer").unwrap(), PaymentState::Pending);
        assert_eq!(state("in_process", "").unwrap(), PaymentState::Pending);
        assert_eq!(state("cancelled", "expired").unwrap(), PaymentState::Expired);
        assert_eq!(state("cancelled", "by_collector").unwrap(), PaymentState::Cancelled);
        assert_eq!(state("rejected", "").unwrap(), PaymentState::Cancelled);
        assert_eq!(state("refunded", "refunded").unwrap(), PaymentState::Paid { end_to_end_id: None });
        assert_eq!(state("approved", "partially_refunded").unwrap(), PaymentState::Paid { end_to_end_id: None });
        assert!(matches!(state("mystery", ""), Err(GatewayError::Unknown(_))));
    }

    #[test]
    fn error_bodies_give_the_message_and_cause() {
        let body = json!({ "message": "Invalid request data", "error": "bad_request", "status": 400,
            "cause": [{ "code": 4020, "description": "notification_url attribute must be url valid" }] });
        assert_eq!(
            readable_error(&body).as_deref(),
            Some("Invalid request data: notification_url attribute must be url valid")
        );
        assert_eq!(readable_error(&json!({ "message": "x", "cause": [] })).as_deref(), Some("x"));
        assert_eq!(readable_error(&json!({ "cause": [{ "description": "y" }] })).as_deref(), Some("y"));
        assert_eq!(readable_error(&Value::Null), None);
    }
}
