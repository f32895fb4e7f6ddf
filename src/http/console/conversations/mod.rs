//! `/admin/{slug}/conversations`: the tenant's conversations, one conversation as a single
//! timeline (messages, and each turn's trace folded in after the messages it answered, with
//! live updates), and human handoff (take over, give back, reply).
//!
//! Invariants:
//! - every query is scoped by the admin's tenant; a conversation of another tenant is a 404;
//! - the timeline shows at most [`TRANSCRIPT_LIMIT`] messages and traces at most
//!   [`TURN_LIMIT`] turns, each read through an index, so the page stays fast on a large
//!   database; older messages are a link away;
//! - stored states show as Portuguese words (`labels`), the raw state only as the CSS class;
//!   the model's stop reasons and tool names stay as recorded, inside a folded trace;
//! - a console reply goes through the outbox under a key made of the conversation and a
//!   random `reply_key` drawn when the form was rendered, so a double submit sends once.

mod handoff;
mod labels;
mod live;
mod timeline;
mod trace;
mod view;

use askama::Template;
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum_csrf::CsrfToken;
use serde::Deserialize;

use super::auth::{Admin, csrf_field};
use super::error::{ConsoleError, render};
use super::page::{Nav, Section};
use crate::domain::ConversationId;
use crate::http::AppState;
use crate::store::{ConversationSummary, ConversationViewStore};
use crate::tenant::Tenant;
use timeline::Entry;
use trace::TraceRows;

/// Messages of both directions shown at once.
const TRANSCRIPT_LIMIT: i64 = 200;
/// Turns traced at once.
const TURN_LIMIT: i64 = 30;
/// Actions and charges read for the trace.
const SIDE_LIMIT: i64 = 100;
/// Conversations per page of the list.
const PAGE_SIZE: i64 = 50;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/admin/{slug}/conversations", get(list))
        .route("/admin/{slug}/conversations/{id}", get(show))
        .route("/admin/{slug}/conversations/{id}/fragment", get(fragment))
        .route("/admin/{slug}/conversations/{id}/events", get(live::events))
        .route("/admin/{slug}/conversations/{id}/handoff", post(handoff::take_over))
        .route("/admin/{slug}/conversations/{id}/release", post(handoff::release))
        .route("/admin/{slug}/conversations/{id}/reply", post(handoff::reply))
        .route("/admin/assets/console_live.js", get(live::script))
}

/// A row of the list.
struct Row {
    id: i64,
    contact: String,
    number: String,
    last: String,
    human: bool,
    requested: bool,
    opted_out: bool,
}

#[derive(Template)]
#[template(path = "console/conversations.html")]
struct ListPage {
    nav: Nav,
    rows: Vec<Row>,
    page: i64,
    next: Option<i64>,
}

#[derive(Deserialize)]
struct ListQuery {
    page: Option<i64>,
}

async fn list(
    State(state): State<AppState>,
    admin: Admin,
    token: CsrfToken,
    Path(slug): Path<String>,
    Query(query): Query<ListQuery>,
) -> Result<Response, ConsoleError> {
    let tenant = admin.tenant(&state, &slug).await?;
    let nav = Nav::new(&admin, &tenant, csrf_field(&token)?, Section::Conversations);
    let page = query.page.unwrap_or(1).clamp(1, 100_000);
    let mut found = state.store.conversations_page(tenant.id, PAGE_SIZE + 1, (page - 1) * PAGE_SIZE).await?;
    let next = (found.len() as i64 > PAGE_SIZE).then_some(page + 1);
    found.truncate(PAGE_SIZE as usize);
    let now = chrono::Utc::now();
    let rows = found
        .iter()
        .map(|c| Row {
            id: c.id,
            contact: view::contact_label(c),
            number: c.wa_id.as_ref().map(|w| format!("+{w}")).unwrap_or_default(),
            last: view::local(c.last_activity, tenant.timezone),
            human: c.handoff_until.is_some_and(|u| u > now),
            requested: c.handoff_requested_at.is_some(),
            opted_out: c.opted_out_at.is_some(),
        })
        .collect();
    Ok((token, render(&ListPage { nav, rows, page, next })?).into_response())
}

/// Which page of older messages (ids below these).
#[derive(Deserialize, Default, Clone, Copy)]
pub struct Before {
    before_in: Option<i64>,
    before_out: Option<i64>,
}

/// Everything the live part of the page shows.
struct Detail {
    /// Messages and traces, oldest first.
    entries: Vec<Entry>,
    older: Option<String>,
    human_until: Option<String>,
    requested_at: Option<String>,
}

#[derive(Template)]
#[template(path = "console/conversations_show.html")]
struct ShowPage {
    nav: Nav,
    id: i64,
    contact_id: i64,
    contact: String,
    number: String,
    opted_out: bool,
    reply_key: String,
    version: String,
    detail: Detail,
}

#[derive(Template)]
#[template(path = "console/conversations_fragment.html")]
struct FragmentPage {
    detail: Detail,
}

/// The conversation `id` of `slug`, or 404.
async fn load(
    state: &AppState,
    admin: &Admin,
    slug: &str,
    id: i64,
) -> Result<(Tenant, ConversationSummary), ConsoleError> {
    let tenant = admin.tenant(state, slug).await?;
    let summary =
        state.store.conversation_summary(tenant.id, ConversationId(id)).await?.ok_or(ConsoleError::NotFound)?;
    Ok((tenant, summary))
}

async fn detail(
    state: &AppState,
    tenant: &Tenant,
    summary: &ConversationSummary,
    before: Before,
) -> Result<Detail, ConsoleError> {
    let (store, t, c) = (&state.store, tenant.id, ConversationId(summary.id));
    let inbound = store.inbound_page(t, c, before.before_in, TRANSCRIPT_LIMIT).await?;
    let outbound = store.outbound_page(t, c, before.before_out, TRANSCRIPT_LIMIT).await?;
    let turns = store.recent_turns(t, c, TURN_LIMIT).await?;
    let first_turn = turns.iter().map(|t| t.id).min().unwrap_or(i64::MAX);
    let calls = store.model_calls_from(t, c, first_turn).await?;
    let executions = store.executions_from(t, c, first_turn).await?;
    let actions = store.recent_actions(t, c, SIDE_LIMIT).await?;
    let charges = store.recent_charges(t, c, SIDE_LIMIT).await?;
    let zone = tenant.timezone;
    let transcript =
        view::transcript(&inbound, &outbound, TRANSCRIPT_LIMIT as usize, (before.before_in, before.before_out), zone);
    let rows = TraceRows {
        turns: &turns,
        inbound: &inbound,
        outbound: &outbound,
        calls: &calls,
        executions: &executions,
        actions: &actions,
        charges: &charges,
    };
    let older = transcript.older.clone();
    let entries = timeline::timeline(transcript, trace::trace(&rows, zone));
    let now = chrono::Utc::now();
    Ok(Detail {
        entries,
        older,
        human_until: summary.handoff_until.filter(|u| *u > now).map(|u| view::local(u, zone)),
        requested_at: summary.handoff_requested_at.map(|u| view::local(u, zone)),
    })
}

async fn show(
    State(state): State<AppState>,
    admin: Admin,
    token: CsrfToken,
    Path((slug, id)): Path<(String, i64)>,
    Query(before): Query<Before>,
) -> Result<Response, ConsoleError> {
    let (tenant, summary) = load(&state, &admin, &slug, id).await?;
    let nav = Nav::new(&admin, &tenant, csrf_field(&token)?, Section::Conversations);
    // Read before the page's rows, so a change made while rendering still triggers a reload.
    let version = live::token(&state.store.conversation_version(tenant.id, ConversationId(id)).await?);
    let detail = detail(&state, &tenant, &summary, before).await?;
    let page = ShowPage {
        nav,
        id,
        contact_id: summary.contact_id,
        contact: view::contact_label(&summary),
        number: summary.wa_id.as_ref().map(|w| format!("+{w}")).unwrap_or_default(),
        opted_out: summary.opted_out_at.is_some(),
        reply_key: uuid::Uuid::new_v4().simple().to_string(),
        version,
        detail,
    };
    Ok((token, render(&page)?).into_response())
}

/// The live part of the page alone (the timeline), for the page's script.
async fn fragment(
    State(state): State<AppState>,
    admin: Admin,
    Path((slug, id)): Path<(String, i64)>,
    Query(before): Query<Before>,
) -> Result<Response, ConsoleError> {
    let (tenant, summary) = load(&state, &admin, &slug, id).await?;
    let detail = detail(&state, &tenant, &summary, before).await?;
    Ok(render(&FragmentPage { detail })?.into_response())
}
