//! `/simulator`: play a customer (or a tenant's staff) without a WhatsApp account. The web page
//! ([`page`]), its send endpoint ([`send`]), its live reply stream ([`events`]), the Pix QR
//! image ([`qr`]), and the JSON API `balcao chat` uses (here). Messages themselves go in
//! through the signed webhook intake, like WhatsApp's.
//!
//! Invariants (access, [`Viewer`]): it shows customers' conversations, so it is open to anyone
//! only in local mode (no App Secret, nothing is sent) on a loopback address, to requests that
//! name a loopback host; otherwise only to callers presenting `BALCAO_ADMIN_TOKEN` (every
//! tenant) or a logged-in console admin (only the tenants they belong to; another tenant is
//! "not found", like one that does not exist), and then only for sandboxed tenants (nothing
//! sent on WhatsApp, Pix in sandbox): on a live tenant it would act as real customers and
//! staff. What anyone does here is recorded as them ([`Viewer::label`]), never as the phone
//! they play.
//! Without any of these the page redirects to the console login and the API answers 401 (an
//! admin token exists and was not presented) or 403. The POST endpoints take JSON or nothing
//! and the session cookie is `SameSite=Lax`, so another site cannot post to them in an admin's
//! name.

mod events;
mod page;
mod qr;
mod send;

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};
use subtle::ConstantTimeEq;

use super::{ApiError, AppState};
use crate::domain::PhoneE164;
use crate::http::console::ConsoleError;
use crate::http::console::auth::Admin;
use crate::money::charges::PaidOutcome;
use crate::store::{ChargeStore, OutboxStore, SimulatorStore, TenantRef, TenantStore};
use crate::tenant::Tenant;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/simulator", get(page::page))
        .route("/simulator/assets/{file}", get(page::asset))
        .route("/simulator/api/tenants/{slug}", get(tenant))
        .route("/simulator/api/tenants/{slug}/outbox", get(outbox))
        .route("/simulator/api/tenants/{slug}/sent", get(sent))
        .route("/simulator/api/tenants/{slug}/messages", post(send::send))
        .route("/simulator/api/tenants/{slug}/events", get(events::events))
        .route("/simulator/api/tenants/{slug}/qr", get(qr::qr))
        .route("/simulator/api/tenants/{slug}/charges", get(charges))
        .route("/simulator/api/tenants/{slug}/charges/{id}/paid", post(mark_paid))
}

/// Why a simulator request was refused.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error(transparent)]
    Api(#[from] ApiError),
    /// No such tenant, or not one this viewer may see.
    #[error("not found")]
    NotFound,
    /// A tenant that sends on WhatsApp or charges through a real Pix provider: outside local
    /// mode the simulator would act in real people's names there.
    #[error("live tenant")]
    Live,
}

impl From<crate::store::StoreError> for SimError {
    fn from(e: crate::store::StoreError) -> Self {
        Self::Api(e.into())
    }
}

impl IntoResponse for SimError {
    fn into_response(self) -> Response {
        match self {
            Self::Api(e) => e.into_response(),
            Self::NotFound => (StatusCode::NOT_FOUND, "not found").into_response(),
            Self::Live => (
                StatusCode::FORBIDDEN,
                "o simulador só atende lojas de teste: sem token do WhatsApp e com o Pix em sandbox",
            )
                .into_response(),
        }
    }
}

/// Who is looking, as far as the simulator cares.
pub enum Viewer {
    /// Local mode on loopback, or the admin token's bearer: every tenant.
    Everyone,
    /// A console admin: their tenants only.
    Admin(Admin),
}

impl Viewer {
    /// Decides from the request's bearer token and console session (`admin`, the extractor's
    /// outcome). The refusal follows the JSON API's rule: 401 when an admin token exists, else
    /// 403.
    pub fn of(state: &AppState, headers: &HeaderMap, admin: Result<Admin, ConsoleError>) -> Result<Self, ApiError> {
        let presented =
            headers.get("authorization").and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "));
        if let (Some(token), Some(p)) = (&state.admin_token, presented)
            && bool::from(p.as_bytes().ct_eq(token.expose().as_bytes()))
        {
            return Ok(Self::Everyone);
        }
        // Open local mode trusts the request, not only the bind address: a same-host proxy or a
        // DNS-rebinding page names another host.
        if state.simulator_open && loopback_host(headers) {
            return Ok(Self::Everyone);
        }
        match (admin, &state.admin_token) {
            (Ok(admin), _) => Ok(Self::Admin(admin)),
            (Err(_), Some(_)) => Err(ApiError::Unauthorized),
            (Err(_), None) => Err(ApiError::Forbidden),
        }
    }

    /// The tenant `slug`, if this viewer may see it: outside open local mode, only a sandboxed
    /// one (see [`sandboxed`]).
    pub async fn tenant(&self, state: &AppState, slug: &str) -> Result<Tenant, SimError> {
        let tenant = match self {
            Self::Everyone => state.store.tenant_by_slug(slug).await?.ok_or(SimError::NotFound)?,
            Self::Admin(admin) => admin.tenant(state, slug).await.map_err(|e| match e {
                ConsoleError::NotFound => SimError::NotFound,
                other => SimError::Api(ApiError::Internal(anyhow::Error::new(other))),
            })?,
        };
        if !state.simulator_open && !sandboxed(state, &tenant) {
            return Err(SimError::Live);
        }
        Ok(tenant)
    }

    /// The tenants this viewer may pick.
    pub async fn tenants(&self, state: &AppState) -> Result<Vec<TenantRef>, SimError> {
        let refs = match self {
            Self::Everyone => state.store.all_tenants().await?,
            Self::Admin(admin) => admin.tenants.clone(),
        };
        if state.simulator_open {
            return Ok(refs);
        }
        let mut open = Vec::new();
        for r in refs {
            if let Some(tenant) = state.store.tenant_by_slug(&r.slug).await?
                && sandboxed(state, &tenant)
            {
                open.push(r);
            }
        }
        Ok(open)
    }

    /// Who the simulator's messages and taps are recorded as: the admin, never a phone.
    pub fn label(&self, state: &AppState) -> String {
        match self {
            Self::Admin(admin) => admin.email.clone(),
            Self::Everyone if state.simulator_open => "modo local".to_owned(),
            Self::Everyone => "token de administrador".to_owned(),
        }
    }
}

/// Whether the request's `Host` is a loopback name (`localhost`, `127.x.x.x`, `[::1]`, any
/// port) and it did not come through a proxy (which may well rewrite `Host` to loopback).
fn loopback_host(headers: &HeaderMap) -> bool {
    if ["forwarded", "x-forwarded-for", "x-forwarded-host", "x-real-ip", "via"].iter().any(|h| headers.contains_key(*h))
    {
        return false;
    }
    let Some(host) = headers.get(axum::http::header::HOST).and_then(|v| v.to_str().ok()) else { return false };
    let name = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    name.eq_ignore_ascii_case("localhost")
        || name.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.to_canonical().is_loopback())
}

/// Whether nothing done to `tenant` reaches a real person or real money: it sends nothing on
/// WhatsApp (no access token of its own or from the server, or local mode) and its Pix is the
/// sandbox (or none).
pub fn sandboxed(state: &AppState, tenant: &Tenant) -> bool {
    state.replier.is_local(tenant) && tenant.settings.pix_is_sandbox()
}

/// The tenant of a `/simulator/api/tenants/{slug}/…` request, if its viewer may use it.
async fn access(
    state: &AppState,
    headers: &HeaderMap,
    admin: Result<Admin, ConsoleError>,
    slug: &str,
) -> Result<Tenant, SimError> {
    Ok(viewing(state, headers, admin, slug).await?.1)
}

/// The viewer and the tenant of a `/simulator/api/tenants/{slug}/…` request.
async fn viewing(
    state: &AppState,
    headers: &HeaderMap,
    admin: Result<Admin, ConsoleError>,
    slug: &str,
) -> Result<(Viewer, Tenant), SimError> {
    let viewer = Viewer::of(state, headers, admin)?;
    let tenant = viewer.tenant(state, slug).await?;
    Ok((viewer, tenant))
}

pub async fn tenant(
    State(state): State<AppState>,
    headers: HeaderMap,
    admin: Result<Admin, ConsoleError>,
    Path(slug): Path<String>,
) -> Result<Json<Value>, SimError> {
    let tenant = access(&state, &headers, admin, &slug).await?;
    let staff: Vec<String> = state.store.staff(tenant.id).await?.iter().map(|p| p.as_str().to_owned()).collect();
    Ok(Json(json!({ "slug": tenant.slug, "name": tenant.name, "phone_number_id": tenant.phone_number_id,
                    "staff": staff })))
}

#[derive(Deserialize)]
pub struct OutboxQuery {
    wa_id: String,
    #[serde(default)]
    after: i64,
}

impl OutboxQuery {
    fn phone(&self) -> Result<PhoneE164, ApiError> {
        PhoneE164::parse(&self.wa_id).map_err(|e| ApiError::BadRequest(e.to_string()))
    }
}

pub async fn outbox(
    State(state): State<AppState>,
    headers: HeaderMap,
    admin: Result<Admin, ConsoleError>,
    Path(slug): Path<String>,
    Query(q): Query<OutboxQuery>,
) -> Result<Json<Value>, SimError> {
    let tenant = access(&state, &headers, admin, &slug).await?;
    let phone = q.phone()?;
    // Whether an answer may still come (`balcao chat` stops waiting once nothing is pending).
    // Read before the messages: a turn finished by then has its replies in what follows.
    let pending = state.store.turn_pending(tenant.id, phone.digits()).await?;
    let rows = state.store.outbound_for_wa_id(tenant.id, phone.digits(), q.after).await?;
    let messages: Vec<Value> =
        rows.iter().map(|r| json!({ "id": r.id, "status": r.status, "message": r.message.0 })).collect();
    Ok(Json(json!({ "messages": messages, "pending": pending })))
}

/// `GET …/sent?wa_id=…`: what this phone sent, so a reloaded page shows both sides again; each
/// with the outbound row it came after (`after`) and its text (a tap's title; a voice note or
/// a media message by its kind).
pub async fn sent(
    State(state): State<AppState>,
    headers: HeaderMap,
    admin: Result<Admin, ConsoleError>,
    Path(slug): Path<String>,
    Query(q): Query<OutboxQuery>,
) -> Result<Json<Value>, SimError> {
    let tenant = access(&state, &headers, admin, &slug).await?;
    let phone = q.phone()?;
    let sent = state.store.sent_by(tenant.id, phone.digits()).await?;
    let sent: Vec<Value> = sent.iter().map(|m| json!({ "after": m.after, "kind": m.kind, "text": m.body })).collect();
    Ok(Json(json!({ "sent": sent })))
}

/// The charge as the simulator shows it: the public fields plus the code and the gateway.
fn charge_json(c: &crate::money::charges::Charge) -> Value {
    let mut v = c.to_json();
    v["copia_e_cola"] = json!(c.copia_e_cola);
    v["gateway"] = json!(c.gateway);
    v
}

/// The tenant's charges of the last 30 days, newest first.
pub async fn charges(
    State(state): State<AppState>,
    headers: HeaderMap,
    admin: Result<Admin, ConsoleError>,
    Path(slug): Path<String>,
) -> Result<Json<Value>, SimError> {
    let tenant = access(&state, &headers, admin, &slug).await?;
    let since = chrono::Utc::now() - chrono::TimeDelta::days(30);
    let charges = state.store.charges(tenant.id, None, since, 200).await?;
    let charges: Vec<Value> = charges.iter().map(charge_json).collect();
    Ok(Json(json!({ "charges": charges })))
}

/// Marks a sandbox charge paid, through the same path a provider's notification takes: the
/// charge moves once and each party is told once, however often this is called.
///
/// The body must be JSON (`{}`): another web site cannot send that content type without a CORS
/// preflight, which this server never grants, so a page elsewhere cannot pay a charge through a
/// visitor's browser (in local mode the API is open on loopback).
pub async fn mark_paid(
    State(state): State<AppState>,
    headers: HeaderMap,
    admin: Result<Admin, ConsoleError>,
    Path((slug, id)): Path<(String, i64)>,
    _json: Json<Value>,
) -> Result<Json<Value>, SimError> {
    let tenant = access(&state, &headers, admin, &slug).await?;
    match state.store.charge(tenant.id, id).await? {
        Some(c) if c.gateway == "sandbox" => {}
        Some(_) => return Err(ApiError::BadRequest(format!("charge {id} is not a sandbox charge")).into()),
        None => return Err(SimError::NotFound),
    }
    let outcome = crate::money::charges::mark_paid(&state.store, &state.replier, &tenant, id, None)
        .await
        .map_err(ApiError::from)?;
    Ok(Json(match outcome {
        PaidOutcome::Paid(c) => json!({ "paid": true, "charge": c.to_json() }),
        PaidOutcome::Unchanged(c) => json!({ "paid": false, "charge": c.to_json() }),
        PaidOutcome::RefundDue(c) => json!({ "paid": true, "refund_due": true, "charge": c.to_json() }),
        PaidOutcome::NotFound => json!({ "paid": false }),
    }))
}
