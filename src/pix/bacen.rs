//! The Banco Central "API Pix" gateway (Efí, Inter, Itaú, Sicredi…): immediate charges
//! (`cob`) over mutual TLS with an OAuth2 client-credentials token.
//!
//! Invariants:
//! - The charge's txid is [`Txid::for_cob`] of the ledger key with the tenant's txid secret
//!   (32 hex digits, inside the API's 26..=35), never the caller's static `req.txid`; it is
//!   what [`CreatedCharge::txid`] returns, and `provider_ref` is that same txid: Bacen charges
//!   are addressed by it, at creation (`PUT /cob/{txid}`), lookup and in notifications.
//! - `create` is idempotent per ledger key: same key, same txid. A `409` on the `PUT` (Efí's
//!   `txid_duplicado`) means the charge exists, so it is fetched and reused. A charge found
//!   under our txid with another amount is refused rather than reused.
//! - Timeouts, broken connections, `408`, `429` and `5xx` are [`GatewayError::Unknown`]: the
//!   charge may exist, and the caller calls `find` (`GET /cob/{txid}`) before creating again.
//!   `401`/`403` (after one token renewal) and a TLS handshake the provider refuses are
//!   [`GatewayError::Unauthorized`]; other `4xx` are [`GatewayError::Rejected`] with the
//!   provider's own text (problem+json or Efí's `{nome, mensagem}`).
//! - One HTTPS client per gateway, with the tenant's client certificate on every request,
//!   the token request included; redirects are not followed and plain HTTP is refused.
//! - `base_url` includes whatever prefix the provider puts before `/cob` (Efí:
//!   `https://pix.api.efipay.com.br/v2`); the token endpoint is `token_url`, by default
//!   `{base_url}/oauth/token` (Efí: set `token_url = "https://pix.api.efipay.com.br/oauth/token"`).
//! - Refunds are devoluções of the charge's Pix (`PUT /pix/{e2eid}/devolucao/{id}`, id = the
//!   refund's id), idempotent by that id (the `devolucao` module). A charge with devoluções stays
//!   `CONCLUIDA` and reads as paid.
//! - Notifications (`POST {registered url}/pix`) are authenticated here by the secret path
//!   segment only; requiring the PSP's client certificate on that route (mutual TLS) is the
//!   reverse proxy's job, as the Bacen manual and Efí ask.

mod api;
mod devolucao;
mod notifications;
mod oauth;

pub use notifications::read_callback;
pub use oauth::read_token_answer;

use std::fmt;
use std::time::Duration;

use bytes::Bytes;
use chrono::Utc;
use reqwest::header::ACCEPT;
use reqwest::{Certificate, Identity, Method, StatusCode};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use super::gateway::{
    CancelOutcome, ChargeRef, ChargeRequest, CreatedCharge, GatewayError, Notification, NotificationError,
    PaymentState, PixGateway, WebhookRequest, after_refused_cancel,
};
use super::gateway::{RefundReceipt, RefundRequest};
use super::secrets::{Secrets, required_secret};
use super::settings::PixSettings;
use super::txid::Txid;
use crate::domain::{LedgerKey, Secret};
use api::Cob;
use oauth::OAuth;

/// A PSP that takes longer than this to accept a TLS connection is down, not slow.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Bounds one whole call (connect, request, answer). Past it the outcome is unknown and the
/// caller looks the charge up before creating again.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// What the client is rebuilt from when the timeouts change.
#[derive(Clone)]
struct Tls {
    identity: Identity,
    roots: Vec<Certificate>,
}

pub struct BacenGateway {
    http: reqwest::Client,
    tls: Tls,
    /// Without a trailing slash; paths like `/cob/{txid}` are appended.
    base_url: String,
    oauth: OAuth,
    /// The tenant's Pix key, the `chave` of every charge.
    chave: String,
    txid_secret: Secret,
    webhook_secret: Option<Secret>,
}

impl fmt::Debug for BacenGateway {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BacenGateway")
            .field("base_url", &self.base_url)
            .field("oauth", &self.oauth)
            .field("chave", &self.chave)
            .finish_non_exhaustive()
    }
}

/// A call's answer, read whole.
struct Reply {
    status: StatusCode,
    body: Bytes,
}

impl BacenGateway {
    /// Reads the secrets and PEM files the settings name and builds the mutual-TLS client.
    pub fn new(settings: &PixSettings, secrets: &dyn Secrets) -> Result<Self, GatewayError> {
        let provider = &settings.provider;
        let base_url = provider
            .base_url
            .as_deref()
            .map(str::trim)
            .filter(|u| !u.is_empty())
            .ok_or_else(|| GatewayError::NotConfigured("[pix] base_url is not set".into()))?;
        let base_url = base_url.trim_end_matches('/').to_owned();
        let token_url = match provider.token_url.as_deref().map(str::trim).filter(|u| !u.is_empty()) {
            Some(url) => url.to_owned(),
            None => format!("{base_url}/oauth/token"),
        };
        for (setting, url) in [("base_url", &base_url), ("token_url", &token_url)] {
            check_https(setting, url)?;
        }
        let client_id = provider
            .client_id
            .as_deref()
            .map(str::trim)
            .filter(|id| !id.is_empty())
            .ok_or_else(|| GatewayError::NotConfigured("[pix] client_id is not set".into()))?;
        let client_secret = required_secret(secrets, "client_secret_env", provider.client_secret_env.as_deref())?;
        let txid_secret = required_secret(secrets, "txid_secret_env", provider.txid_secret_env.as_deref())?;
        let webhook_secret = match provider.webhook_secret_env.as_deref() {
            Some(name) => Some(required_secret(secrets, "webhook_secret_env", Some(name))?),
            None => None,
        };
        let cert_file = required_setting("cert_file", provider.cert_file.as_deref())?;
        let key_file = required_setting("key_file", provider.key_file.as_deref())?;
        let tls = Tls {
            identity: load_identity(cert_file, key_file)?,
            roots: match provider.ca_file.as_deref().map(str::trim).filter(|f| !f.is_empty()) {
                Some(ca_file) => load_roots(ca_file)?,
                None => Vec::new(),
            },
        };
        let http = build_client(&tls, CONNECT_TIMEOUT, provider.timeout.unwrap_or(REQUEST_TIMEOUT))?;
        Ok(Self {
            http,
            tls,
            base_url,
            oauth: OAuth::new(token_url, client_id.to_owned(), client_secret),
            chave: settings.key.as_str().to_owned(),
            txid_secret,
            webhook_secret,
        })
    }

    /// The same gateway with other timeouts (tests use short ones).
    pub fn with_timeouts(mut self, connect: Duration, total: Duration) -> Result<Self, GatewayError> {
        self.http = build_client(&self.tls, connect, total)?;
        Ok(self)
    }

    /// The txid of the charge for `key`: what `create` puts at the provider and returns.
    pub fn txid_for(&self, key: &LedgerKey) -> Txid {
        Txid::for_cob(key, self.txid_secret.expose().as_bytes())
    }

    /// One API call with the cached token; on `401` the token is renewed once and the call
    /// made once more (a `401` means the provider did not act on the request).
    async fn call(&self, method: Method, path: &str, body: Option<&serde_json::Value>) -> Result<Reply, GatewayError> {
        let token = self.oauth.token(&self.http).await?;
        let reply = self.send(method.clone(), path, body, &token).await?;
        if reply.status != StatusCode::UNAUTHORIZED {
            return Ok(reply);
        }
        tracing::info!(gateway = "bacen", path, "the provider refused the access token; renewing it once");
        let token = self.oauth.renew(&self.http, &token).await?;
        self.send(method, path, body, &token).await
    }

    async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<&serde_json::Value>,
        token: &Secret,
    ) -> Result<Reply, GatewayError> {
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.base_url))
            .bearer_auth(token.expose())
            .header(ACCEPT, "application/json");
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request.send().await.map_err(|e| api::transport_error(&e))?;
        let status = response.status();
        let body = response.bytes().await.map_err(|e| api::transport_error(&e))?;
        Ok(Reply { status, body })
    }

    /// `GET /cob/{txid}`: the charge, or `None` when the provider has none (`404`).
    async fn get_cob(&self, txid: &Txid) -> Result<Option<Cob>, GatewayError> {
        let reply = self.call(Method::GET, &format!("/cob/{txid}"), None).await?;
        cob_reply(reply.status, &reply.body)
    }

    /// The charge as the caller records it: its code (from the `cob`, or from its location
    /// when the provider leaves `pixCopiaECola` out) and its expiry.
    async fn created(&self, txid: Txid, req: &ChargeRequest, cob: Cob) -> Result<CreatedCharge, GatewayError> {
        cob.check_matches(&txid, req.amount)?;
        let copia_e_cola = match cob.copia_e_cola() {
            Some(code) => code.to_owned(),
            None => {
                let loc = cob.loc_id().ok_or_else(|| {
                    GatewayError::Rejected(format!("the provider's charge {txid} has neither pixCopiaECola nor loc.id"))
                })?;
                let reply = self.call(Method::GET, &format!("/loc/{loc}/qrcode"), None).await?;
                if !reply.status.is_success() {
                    return Err(api::status_error(reply.status, &reply.body));
                }
                api::parse_qrcode(&reply.body)?
            }
        };
        let expires_at = cob.expires_at().unwrap_or(req.expires_at);
        Ok(CreatedCharge { provider_ref: Some(txid.as_str().to_owned()), txid, copia_e_cola, expires_at })
    }
}

/// The charge in an answer to `GET /cob/{txid}`, `None` for `404`.
fn cob_reply(status: StatusCode, body: &[u8]) -> Result<Option<Cob>, GatewayError> {
    match status {
        StatusCode::OK => api::parse_cob(body).map(Some),
        StatusCode::NOT_FOUND => Ok(None),
        status => Err(api::status_error(status, body)),
    }
}

/// Reads an answer to `GET /cob/{txid}` as the gateway does: the charge's payment state at
/// `now` (`None` when the provider has no such charge), after checking it against `txid` and
/// `amount` and reading its code, location and expiry. Public for the fuzz targets; never
/// panics.
pub fn read_cob(
    status: StatusCode,
    body: &[u8],
    txid: &Txid,
    amount: crate::domain::Cents,
    now: chrono::DateTime<Utc>,
) -> Result<Option<PaymentState>, GatewayError> {
    let Some(cob) = cob_reply(status, body)? else { return Ok(None) };
    cob.check_matches(txid, amount)?;
    let _ = (cob.copia_e_cola(), cob.loc_id(), cob.expires_at());
    cob.payment_state(now).map(Some)
}

#[async_trait::async_trait]
impl PixGateway for BacenGateway {
    fn name(&self) -> &'static str {
        "bacen"
    }

    async fn create(&self, req: &ChargeRequest) -> Result<CreatedCharge, GatewayError> {
        if req.amount.0 <= 0 {
            return Err(GatewayError::Rejected(format!("the amount must be positive, not {}", req.amount)));
        }
        let txid = self.txid_for(&req.key);
        let body = api::cob_request(&self.chave, req, Utc::now());
        let reply = self.call(Method::PUT, &format!("/cob/{txid}"), Some(&body)).await?;
        let cob = match reply.status {
            status if status.is_success() => api::parse_cob(&reply.body)?,
            // Efí answers a second PUT with `txid_duplicado`: the charge is there, reuse it.
            StatusCode::CONFLICT => self.get_cob(&txid).await?.ok_or_else(|| {
                GatewayError::Unknown(format!("the provider says txid {txid} is taken (409) but does not find it"))
            })?,
            status => return Err(api::status_error(status, &reply.body)),
        };
        self.created(txid, req, cob).await
    }

    async fn find(&self, req: &ChargeRequest) -> Result<Option<CreatedCharge>, GatewayError> {
        let txid = self.txid_for(&req.key);
        match self.get_cob(&txid).await? {
            Some(cob) => self.created(txid, req, cob).await.map(Some),
            None => Ok(None),
        }
    }

    async fn state(&self, charge: &ChargeRef) -> Result<PaymentState, GatewayError> {
        let txid = Txid::parse(&charge.txid).map_err(|e| GatewayError::Rejected(e.to_string()))?;
        let cob = self
            .get_cob(&txid)
            .await?
            .ok_or_else(|| GatewayError::Rejected(format!("the provider has no charge with txid {txid}")))?;
        cob.payment_state(Utc::now())
    }

    /// `PUT /pix/{e2eid}/devolucao/{id}` (see the `devolucao` module).
    async fn refund(&self, req: &RefundRequest) -> Result<RefundReceipt, GatewayError> {
        self.request_refund(req).await
    }

    /// `GET /pix/{e2eid}/devolucao/{id}`.
    async fn find_refund(&self, req: &RefundRequest) -> Result<Option<RefundReceipt>, GatewayError> {
        self.lookup_refund(req).await
    }

    /// `PATCH /cob/{txid}` with `status: REMOVIDA_PELO_USUARIO_RECEBEDOR`; a `CONCLUIDA` charge
    /// cannot be removed.
    async fn cancel(&self, charge: &ChargeRef) -> Result<CancelOutcome, GatewayError> {
        let txid = Txid::parse(&charge.txid).map_err(|e| GatewayError::Rejected(e.to_string()))?;
        let body = serde_json::json!({ "status": api::REMOVED_BY_RECEIVER });
        let reply = self.call(Method::PATCH, &format!("/cob/{txid}"), Some(&body)).await?;
        match reply.status {
            status if status.is_success() => Ok(CancelOutcome::Cancelled),
            // Never created: nothing to withdraw.
            StatusCode::NOT_FOUND => Ok(CancelOutcome::Cancelled),
            status => match api::status_error(status, &reply.body) {
                refusal @ GatewayError::Rejected(_) => after_refused_cancel(self, charge, refusal).await,
                other => Err(other),
            },
        }
    }

    fn notifications(&self, request: &WebhookRequest<'_>) -> Result<Vec<Notification>, NotificationError> {
        notifications::read(self.webhook_secret.as_ref(), request)
    }
}

fn required_setting<'a>(setting: &str, value: Option<&'a str>) -> Result<&'a str, GatewayError> {
    value
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .ok_or_else(|| GatewayError::NotConfigured(format!("[pix] {setting} is not set")))
}

/// The client secret and the bearer token travel with every call: never over plain HTTP.
fn check_https(setting: &str, url: &str) -> Result<(), GatewayError> {
    match reqwest::Url::parse(url) {
        Ok(parsed) if parsed.scheme() == "https" && parsed.host().is_some() => Ok(()),
        Ok(_) => Err(GatewayError::NotConfigured(format!("[pix] {setting} {url:?} must be an https:// URL"))),
        Err(e) => Err(GatewayError::NotConfigured(format!("[pix] {setting} {url:?} is not a URL: {e}"))),
    }
}

fn read_file(setting: &str, path: &str) -> Result<Vec<u8>, GatewayError> {
    std::fs::read(path).map_err(|e| GatewayError::NotConfigured(format!("cannot read [pix] {setting} {path:?}: {e}")))
}

/// The client certificate (chain) and its private key, checked file by file so an error
/// names the file at fault. Both may be the same file (a `.p12` converted to one PEM).
fn load_identity(cert_file: &str, key_file: &str) -> Result<Identity, GatewayError> {
    let certs = read_file("cert_file", cert_file)?;
    let not_pem = |setting: &str, path: &str, what: &str, e: String| {
        GatewayError::NotConfigured(format!("[pix] {setting} {path:?} holds no usable PEM {what}: {e}"))
    };
    let parsed = CertificateDer::pem_slice_iter(&certs)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| not_pem("cert_file", cert_file, "certificate", e.to_string()))?;
    if parsed.is_empty() {
        return Err(not_pem("cert_file", cert_file, "certificate", "no CERTIFICATE section".into()));
    }
    let mut pem = certs;
    if key_file != cert_file {
        let key = read_file("key_file", key_file)?;
        PrivateKeyDer::from_pem_slice(&key).map_err(|e| not_pem("key_file", key_file, "private key", e.to_string()))?;
        pem.push(b'\n');
        pem.extend_from_slice(&key);
    } else {
        PrivateKeyDer::from_pem_slice(&pem).map_err(|e| not_pem("key_file", key_file, "private key", e.to_string()))?;
    }
    Identity::from_pem(&pem).map_err(|e| {
        GatewayError::NotConfigured(format!("[pix] cert_file {cert_file:?} and key_file {key_file:?}: {e}"))
    })
}

fn load_roots(ca_file: &str) -> Result<Vec<Certificate>, GatewayError> {
    let pem = read_file("ca_file", ca_file)?;
    match Certificate::from_pem_bundle(&pem) {
        Ok(roots) if !roots.is_empty() => Ok(roots),
        Ok(_) => Err(GatewayError::NotConfigured(format!("[pix] ca_file {ca_file:?} holds no PEM certificate"))),
        Err(e) => {
            Err(GatewayError::NotConfigured(format!("[pix] ca_file {ca_file:?} holds no usable certificate: {e}")))
        }
    }
}

fn build_client(tls: &Tls, connect: Duration, total: Duration) -> Result<reqwest::Client, GatewayError> {
    reqwest::Client::builder()
        .identity(tls.identity.clone())
        .tls_certs_merge(tls.roots.iter().cloned())
        .https_only(true)
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(connect)
        .timeout(total)
        .user_agent(concat!("balcao/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| {
            GatewayError::NotConfigured(format!(
                "cannot build the mutual-TLS client from [pix] cert_file/key_file: {e}"
            ))
        })
}
