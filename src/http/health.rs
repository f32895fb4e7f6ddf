//! `/healthz` (the process answers), `/readyz` (database reachable, migrations applied) and
//! `/metrics` (Prometheus text).

use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;

use super::{ApiError, AppState};

pub async fn healthz() -> &'static str {
    "ok"
}

pub async fn readyz(State(state): State<AppState>) -> Result<&'static str, ApiError> {
    match state.store.is_ready().await {
        Ok(true) => Ok("ready"),
        Ok(false) => Err(ApiError::Unavailable("migrations pending".into())),
        Err(e) => {
            tracing::warn!(error = %e, "readiness check failed");
            Err(ApiError::Unavailable("database unreachable".into()))
        }
    }
}

pub async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")], state.metrics.render())
}
