//! `POST /webhooks/pix/{tenant}/{provider}`: payment notifications. Bacen callbacks carry a
//! secret path segment (`…/bacen/{secret}`, to which the provider appends `/pix`).
//!
//! Answers: 200 once the events are stored (duplicates included), 401 when the gateway does
//! not find the notification authentic (nothing stored), 400 for an authentic but malformed
//! body, 404 for a tenant or provider we do not serve, 500 only when the database failed (the
//! provider retries, and duplicates are stored once).

use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};

use super::AppState;
use crate::money::payments::{ReceiveError, receive};
use crate::pix::WebhookRequest;

async fn handle(
    state: &AppState,
    slug: &str,
    provider: &str,
    secret: Option<&str>,
    query: Option<&str>,
    headers: &HeaderMap,
    body: &[u8],
) -> StatusCode {
    let request = WebhookRequest { headers, query, path_secret: secret, body };
    match receive(&state.store, &state.gateways, slug, provider, &request).await {
        Ok(_) => {
            state.wake_payments.notify_one();
            StatusCode::OK
        }
        Err(ReceiveError::UnknownTenant(_)) => StatusCode::NOT_FOUND,
        Err(ReceiveError::Unauthenticated) => {
            tracing::warn!(tenant = slug, provider, "payment notification refused: not authentic");
            StatusCode::UNAUTHORIZED
        }
        Err(ReceiveError::Malformed(why)) => {
            tracing::warn!(tenant = slug, provider, %why, "malformed payment notification");
            StatusCode::BAD_REQUEST
        }
        Err(ReceiveError::Store(e)) => {
            tracing::error!(tenant = slug, provider, error = %e, "failed to store a payment notification");
            StatusCode::INTERNAL_SERVER_ERROR
        }
    }
}

pub async fn notify(
    State(state): State<AppState>,
    Path((slug, provider)): Path<(String, String)>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    handle(&state, &slug, &provider, None, query.as_deref(), &headers, &body).await
}

/// With a secret path segment (Bacen), also under `…/pix` as the provider appends it.
pub async fn notify_with_secret(
    State(state): State<AppState>,
    Path((slug, provider, secret)): Path<(String, String, String)>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    handle(&state, &slug, &provider, Some(&secret), query.as_deref(), &headers, &body).await
}
