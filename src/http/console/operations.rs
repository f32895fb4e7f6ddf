//! The console's operations pages: charges (with the last 30 days' paid totals as a chart),
//! pending actions, failures (dead jobs, with a retry, and failed sends) and the catalog
//! (read-only: the tenant file is the source of truth).
//!
//! Invariants: every read is scoped by the admin's tenant and bounded (newest first, at most
//! [`LIST_LIMIT`] rows); amounts are integer cents to the end, formatted only for display.

mod catalog;
mod charges;
mod failures;

use askama::Template;
use axum::Router;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum_csrf::CsrfToken;

use super::agenda::detail_support::{ActionRow, action_row};
use super::auth::{Admin, csrf_field};
use super::error::{ConsoleError, render};
use super::page::{Nav, Section};
use crate::http::AppState;
use crate::store::ConsoleOpsStore;

/// The longest list a page shows.
const LIST_LIMIT: i64 = 200;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/admin/{slug}/charges", get(charges::page))
        .route("/admin/{slug}/charges/{id}/cancel", post(charges::cancel))
        .route("/admin/{slug}/charges/{id}/refund", post(charges::refund))
        .route("/admin/{slug}/actions", get(actions))
        .route("/admin/{slug}/failures", get(failures::page))
        .route("/admin/{slug}/jobs/{id}/retry", post(failures::retry))
        .route("/admin/{slug}/catalog", get(catalog::page))
}

#[derive(Template)]
#[template(path = "console/actions.html")]
struct ActionsPage {
    nav: Nav,
    actions: Vec<Listed>,
}

/// An action and where its subject links to, if anywhere.
struct Listed {
    row: ActionRow,
    subject: String,
    href: Option<String>,
}

async fn actions(
    State(state): State<AppState>,
    admin: Admin,
    token: CsrfToken,
    Path(slug): Path<String>,
) -> Result<Response, ConsoleError> {
    let tenant = admin.tenant(&state, &slug).await?;
    let nav = Nav::new(&admin, &tenant, csrf_field(&token)?, Section::Actions);
    let entries = state.store.action_entries(tenant.id, LIST_LIMIT).await?;
    let actions = entries
        .iter()
        .map(|a| {
            let href = a
                .subject
                .strip_prefix("appointment:")
                .and_then(|id| id.parse::<i64>().ok())
                .map(|id| nav.href(&format!("appointments/{id}")));
            Listed { row: action_row(tenant.timezone, a), subject: a.subject.clone(), href }
        })
        .collect();
    let page = ActionsPage { actions, nav };
    Ok((token, render(&page)?).into_response())
}
