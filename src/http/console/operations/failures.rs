//! `/admin/{slug}/failures`: turns that gave up (dead jobs, with their last error and a
//! "Tentar de novo" button) and messages the outbox could not deliver.
//!
//! A retry moves only a dead job of this tenant back to the queue, so repeating it (a double
//! click, a reload) changes nothing more; another tenant's job id is "not found".

use askama::Template;
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Redirect, Response};
use axum_csrf::CsrfToken;
use chrono::Utc;
use serde::Deserialize;

use super::LIST_LIMIT;
use crate::domain::JobId;
use crate::http::AppState;
use crate::http::console::auth::{Admin, csrf_field};
use crate::http::console::error::{ConsoleError, render};
use crate::http::console::page::{Nav, Section, local_time as at};
use crate::store::{ConsoleOpsStore, Retry};

pub struct JobRow {
    pub id: i64,
    pub conversation_id: i64,
    pub kind: String,
    pub attempts: String,
    pub last_error: String,
    pub when: String,
}

pub struct SendRow {
    pub id: i64,
    pub conversation_id: i64,
    pub key: String,
    pub attempts: i64,
    pub last_error: String,
    pub when: String,
}

#[derive(Template)]
#[template(path = "console/failures.html")]
struct FailuresPage {
    nav: Nav,
    jobs: Vec<JobRow>,
    sends: Vec<SendRow>,
    notice: Option<&'static str>,
}

#[derive(Deserialize)]
pub struct FailuresQuery {
    ok: Option<String>,
}

pub async fn page(
    State(state): State<AppState>,
    admin: Admin,
    token: CsrfToken,
    Path(slug): Path<String>,
    Query(query): Query<FailuresQuery>,
) -> Result<Response, ConsoleError> {
    let tenant = admin.tenant(&state, &slug).await?;
    let nav = Nav::new(&admin, &tenant, csrf_field(&token)?, Section::Failures);
    let tz = tenant.timezone;
    let jobs = state
        .store
        .dead_jobs(tenant.id, LIST_LIMIT)
        .await?
        .into_iter()
        .map(|j| JobRow {
            id: j.id,
            conversation_id: j.conversation_id,
            kind: match j.kind.as_str() {
                "turn" => "resposta".to_owned(),
                "click" => "clique em botão".to_owned(),
                other => other.to_owned(),
            },
            attempts: format!("{}/{}", j.attempts, j.max_attempts),
            last_error: j.last_error.unwrap_or_default(),
            when: at(tz, j.updated_at),
        })
        .collect();
    let sends = state
        .store
        .failed_sends(tenant.id, LIST_LIMIT)
        .await?
        .into_iter()
        .map(|s| SendRow {
            id: s.id,
            conversation_id: s.conversation_id,
            key: s.idempotency_key,
            attempts: s.attempts,
            last_error: s.last_error.unwrap_or_default(),
            when: at(tz, s.updated_at),
        })
        .collect();
    let notice = match query.ok.as_deref() {
        Some("requeued") => Some("A tarefa voltou para a fila e será processada em instantes."),
        Some("not_dead") => Some("Essa tarefa já não está parada: nada a fazer."),
        _ => None,
    };
    Ok((token, render(&FailuresPage { nav, jobs, sends, notice })?).into_response())
}

pub async fn retry(
    State(state): State<AppState>,
    admin: Admin,
    Path((slug, id)): Path<(String, i64)>,
) -> Result<Response, ConsoleError> {
    let tenant = admin.tenant(&state, &slug).await?;
    let outcome = match state.store.retry_dead_job(tenant.id, JobId(id), state.store.db_time(Utc::now())).await? {
        Retry::Unknown => return Err(ConsoleError::NotFound),
        Retry::Requeued => {
            tracing::info!(job = id, "a dead job was sent back to the queue from the console");
            state.wake_workers.notify_one();
            "requeued"
        }
        Retry::NotDead => "not_dead",
    };
    Ok(Redirect::to(&format!("/admin/{}/failures?ok={outcome}", tenant.slug)).into_response())
}
