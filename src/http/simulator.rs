//! `/simulator/api`: what `balcao chat` (and the web simulator) need to play a customer
//! without a WhatsApp account. Messages themselves go in through the signed webhook, like
//! WhatsApp's.
//!
//! Invariant: it shows customers' conversations, so it is open to anyone only in local mode
//! (no App Secret, nothing is sent) on a loopback address; otherwise only to callers presenting
//! `BALCAO_ADMIN_TOKEN`, whatever access tokens are or are not configured.

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use serde::Deserialize;
use serde_json::{Value, json};
use subtle::ConstantTimeEq;

use super::{ApiError, AppState};
use crate::charges::PaidOutcome;
use crate::domain::PhoneE164;
use crate::store::{ChargeStore, OutboxStore, TenantStore};

fn authorize(state: &AppState, headers: &HeaderMap) -> Result<(), ApiError> {
    let presented = headers.get("authorization").and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "));
    match (&state.admin_token, presented) {
        (Some(token), Some(p)) if bool::from(p.as_bytes().ct_eq(token.expose().as_bytes())) => Ok(()),
        _ if state.simulator_open => Ok(()),
        (Some(_), _) => Err(ApiError::Unauthorized),
        (None, _) => Err(ApiError::Forbidden),
    }
}

pub async fn tenant(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(slug): Path<String>,
) -> Result<Json<Value>, ApiError> {
    authorize(&state, &headers)?;
    let tenant = tenant_of(&state, &slug).await?;
    Ok(Json(json!({ "slug": tenant.slug, "name": tenant.name, "phone_number_id": tenant.phone_number_id })))
}

#[derive(Deserialize)]
pub struct OutboxQuery {
    wa_id: String,
    #[serde(default)]
    after: i64,
}

pub async fn outbox(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(slug): Path<String>,
    Query(q): Query<OutboxQuery>,
) -> Result<Json<Value>, ApiError> {
    authorize(&state, &headers)?;
    let phone = PhoneE164::parse(&q.wa_id).map_err(|e| ApiError::BadRequest(e.to_string()))?;
    let tenant = tenant_of(&state, &slug).await?;
    let rows = state.store.outbound_for_wa_id(tenant.id, phone.digits(), q.after).await?;
    let messages: Vec<Value> =
        rows.iter().map(|r| json!({ "id": r.id, "status": r.status, "message": r.message.0 })).collect();
    Ok(Json(json!({ "messages": messages })))
}

async fn tenant_of(state: &AppState, slug: &str) -> Result<crate::tenant::Tenant, ApiError> {
    state.store.tenant_by_slug(slug).await?.ok_or_else(|| ApiError::BadRequest(format!("no tenant {slug:?}")))
}

/// The tenant's charges of the last 30 days, newest first.
pub async fn charges(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(slug): Path<String>,
) -> Result<Json<Value>, ApiError> {
    authorize(&state, &headers)?;
    let tenant = tenant_of(&state, &slug).await?;
    let since = chrono::Utc::now() - chrono::TimeDelta::days(30);
    let charges = state.store.charges(tenant.id, None, since, 200).await?;
    let charges: Vec<Value> = charges
        .iter()
        .map(|c| {
            let mut v = c.to_json();
            v["copia_e_cola"] = json!(c.copia_e_cola);
            v["gateway"] = json!(c.gateway);
            v
        })
        .collect();
    Ok(Json(json!({ "charges": charges })))
}

/// Marks a sandbox charge paid, through the same path a provider's notification takes: the
/// charge moves once and each party is told once, however often this is called.
pub async fn mark_paid(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path((slug, id)): Path<(String, i64)>,
) -> Result<Json<Value>, ApiError> {
    authorize(&state, &headers)?;
    let tenant = tenant_of(&state, &slug).await?;
    match state.store.charge(tenant.id, id).await? {
        Some(c) if c.gateway == "sandbox" => {}
        Some(_) => return Err(ApiError::BadRequest(format!("charge {id} is not a sandbox charge"))),
        None => return Err(ApiError::BadRequest(format!("no charge {id}"))),
    }
    let outcome = crate::charges::mark_paid(&state.store, &state.replier, &tenant, id, None).await?;
    Ok(Json(match outcome {
        PaidOutcome::Paid(c) => json!({ "paid": true, "charge": c.to_json() }),
        PaidOutcome::Unchanged(c) => json!({ "paid": false, "charge": c.to_json() }),
        PaidOutcome::RefundDue(c) => json!({ "paid": true, "refund_due": true, "charge": c.to_json() }),
        PaidOutcome::NotFound => json!({ "paid": false }),
    }))
}
