//! `/healthz` (the process answers), `/readyz` (database reachable, migrations applied) and
//! `/metrics` (Prometheus text).

use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use chrono::Utc;

use super::{ApiError, AppState};
use crate::store::JobStore;

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

/// Sets the queue gauges from the store, then encodes. A store failure still serves the
/// counters (the gauges keep their last values) rather than failing the scrape.
pub async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    // Job times are on the database's clock (see `Store::db_time`).
    let now = state.store.db_time(Utc::now());
    match state.store.runnable_jobs(now).await {
        Ok(runnable) => {
            state.metrics.queue_depth.set(runnable.count);
            // A job due "in the future" by clock noise is simply not old.
            let age =
                runnable.oldest_due.and_then(|due| (now - due).to_std().ok()).map_or(0.0, |age| age.as_secs_f64());
            state.metrics.queue_oldest_seconds.set(age);
        }
        Err(e) => tracing::warn!(error = %e, "failed to read the queue for /metrics"),
    }
    ([(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")], state.metrics.render())
}
