//! Live updates of a conversation page: a server-sent event whenever the conversation's
//! version (newest rows, recent status changes, handoff) changes, polled cheaply; the page's
//! script then reloads the timeline fragment (keeping the traces the reader opened open).
//!
//! Invariants: each event's id is the version it announces, so a reconnecting browser
//! (`Last-Event-ID`) is told only about changes it has not seen; a stream ends by itself after
//! [`STREAM_FOR`] (the browser reconnects at once), so an open page never holds a graceful
//! shutdown back for long.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::{Stream, StreamExt};
use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::load;
use crate::domain::ConversationId;
use crate::http::AppState;
use crate::http::console::auth::Admin;
use crate::http::console::error::ConsoleError;
use crate::store::{ConversationVersion, ConversationViewStore, Store};
use crate::tenant::Tenant;

/// How often the version is read.
const POLL_EVERY: Duration = Duration::from_millis(500);
/// How long one stream lasts before the browser is asked to reconnect.
const STREAM_FOR: Duration = Duration::from_secs(25);
/// How soon the browser reconnects after a stream ends.
const RECONNECT_AFTER: Duration = Duration::from_millis(500);

/// A short token of a version (it travels in URLs and event ids).
pub fn token(version: &ConversationVersion) -> String {
    let digest = Sha256::digest(format!("{version:?}").as_bytes());
    hex::encode(&digest[..8])
}

#[derive(Deserialize)]
pub struct Since {
    /// The version the page was rendered at.
    v: Option<String>,
}

pub async fn events(
    State(state): State<AppState>,
    admin: Admin,
    Path((slug, id)): Path<(String, i64)>,
    Query(since): Query<Since>,
    headers: HeaderMap,
) -> Result<Response, ConsoleError> {
    let (tenant, _) = load(&state, &admin, &slug, id).await?;
    let seen =
        headers.get("last-event-id").and_then(|v| v.to_str().ok()).map(str::to_owned).or(since.v).unwrap_or_default();
    let stream = changes(state.store.clone(), tenant, ConversationId(id), seen);
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()).into_response())
}

/// An event each time the version differs from the last one seen; ends if the store fails.
fn changes(
    store: Store,
    tenant: Tenant,
    conversation: ConversationId,
    seen: String,
) -> impl Stream<Item = Result<Event, Infallible>> {
    let ends = tokio::time::Instant::now() + STREAM_FOR;
    let hello = futures::stream::once(async { Ok(Event::default().retry(RECONNECT_AFTER)) });
    let updates = futures::stream::unfold((store, seen, true), move |(store, mut seen, first)| {
        let tenant = tenant.id;
        async move {
            if !first {
                tokio::time::sleep(POLL_EVERY).await;
            }
            loop {
                if tokio::time::Instant::now() >= ends {
                    return None;
                }
                let version = match store.conversation_version(tenant, conversation).await {
                    Ok(v) => token(&v),
                    Err(e) => {
                        tracing::warn!(error = %e, "live conversation updates stopped");
                        return None;
                    }
                };
                if version != seen {
                    seen = version.clone();
                    let event = Event::default().event("change").id(version.clone()).data(version);
                    return Some((Ok(event), (store, seen, false)));
                }
                tokio::time::sleep(POLL_EVERY).await;
            }
        }
    });
    hello.chain(updates)
}

pub async fn script() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/javascript; charset=utf-8")], include_str!("../../../../assets/console_live.js"))
}
