//! `GET|POST /webhooks/whatsapp`.
//!
//! POST order: signature over the raw bytes → JSON → every element stored (each message with
//! its job in one transaction, shared with concurrent requests' writes by the group commit) →
//! 200 once that transaction committed. A duplicate is 200 and changes nothing. An
//! unknown number is 200 (retrying cannot help and would storm). A database failure is 500,
//! so Meta redelivers the batch; what was stored is deduplicated then.

use std::collections::HashMap;
use std::time::Instant;

use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::IntoResponse;
use subtle::ConstantTimeEq;

use super::{ApiError, AppState};
use crate::inbound::ingest;
use crate::whatsapp::signature;

/// Meta's subscription handshake: echo `hub.challenge` as the raw string.
pub async fn verify_subscription(
    State(state): State<AppState>,
    Query(params): Query<HashMap<String, String>>,
) -> Result<impl IntoResponse, ApiError> {
    let Some(expected) = state.verify_token.as_ref() else {
        tracing::warn!("webhook verification attempted but WHATSAPP_VERIFY_TOKEN is not set");
        return Err(ApiError::Forbidden);
    };
    let mode_ok = params.get("hub.mode").is_some_and(|m| m == "subscribe");
    let token_ok =
        params.get("hub.verify_token").is_some_and(|t| bool::from(t.as_bytes().ct_eq(expected.expose().as_bytes())));
    match (mode_ok && token_ok, params.get("hub.challenge")) {
        (true, Some(challenge)) => Ok(([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], challenge.clone())),
        _ => Err(ApiError::Forbidden),
    }
}

/// [`handle`], timed into `webhook_seconds` whatever it answers.
pub async fn receive(State(state): State<AppState>, headers: HeaderMap, body: Bytes) -> Result<StatusCode, ApiError> {
    let started = Instant::now();
    let answer = handle(&state, &headers, &body).await;
    state.metrics.webhook_seconds.observe(started.elapsed().as_secs_f64());
    answer
}

async fn handle(state: &AppState, headers: &HeaderMap, body: &Bytes) -> Result<StatusCode, ApiError> {
    let header = headers.get("x-hub-signature-256").and_then(|v| v.to_str().ok());
    if let Err(e) = signature::verify(state.app_secret.expose().as_bytes(), body, header) {
        state.metrics.webhook_signature_rejected.inc();
        tracing::warn!(reason = %e, "rejected a webhook POST");
        return Err(ApiError::Unauthorized);
    }
    let value: serde_json::Value = serde_json::from_slice(body).map_err(|e| {
        state.metrics.webhook_parse_errors.inc();
        ApiError::BadRequest(format!("body is not JSON: {e}"))
    })?;
    store(state, &value, None).await
}

/// Stores an authentic body's elements and wakes the workers; asks for a redelivery when some
/// could not be stored. `simulated_by` marks messages the simulator sent ([`NewInbound`]).
///
/// [`NewInbound`]: crate::whatsapp::NewInbound
pub async fn store(
    state: &AppState,
    value: &serde_json::Value,
    simulated_by: Option<&str>,
) -> Result<StatusCode, ApiError> {
    let (store, key) = (&state.store, &state.privacy_key);
    let report = ingest(store, &state.tenants, &state.metrics, &state.intake, key, value, simulated_by).await;
    if report.stored > 0 {
        state.wake_workers.notify_one();
    }
    if report.storage_failures > 0 {
        return Err(ApiError::Internal(anyhow::anyhow!(
            "{} webhook elements could not be stored; asking for redelivery",
            report.storage_failures
        )));
    }
    Ok(StatusCode::OK)
}
