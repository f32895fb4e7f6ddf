//! `GET /simulator/api/tenants/{slug}/events?wa_id=…&after=N`: server-sent events carrying
//! the contact's outbound messages after outbox row N, then each new one as it is queued.
//!
//! Each event is `event: message`, `id:` the outbox row id, and data
//! `{ id, status, wamid, message, charge }`: `message` is the stored [`OutboundMessage`] JSON;
//! `charge` is set when the message carries a Pix code of one of the tenant's charges (its id,
//! status and gateway, so the page can offer "marcar como pago").
//!
//! Invariants: the store is polled every [`POLL`] (the outbox has no notification that
//! crosses processes); a reconnecting `EventSource` resumes after its `Last-Event-ID`; the
//! stream ends when the client goes away (axum drops it), the server shuts down, reading the
//! store fails, or after [`LIFETIME`]: the browser then reconnects by itself, and each
//! reconnection is authorized again (a logged-out admin stops receiving).

use std::collections::VecDeque;
use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::Stream;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{SimError, access, charge_json};
use crate::domain::{PhoneE164, TenantId};
use crate::http::console::ConsoleError;
use crate::http::console::auth::Admin;
use crate::http::{ApiError, AppState};
use crate::store::{ChargeStore, OutboundRecord, OutboxStore};
use crate::whatsapp::OutboundMessage;

/// How often the outbox is looked at for new rows.
const POLL: Duration = Duration::from_millis(250);
/// How long one stream lasts before the browser is made to reconnect.
const LIFETIME: Duration = Duration::from_secs(60);
/// How far back a charge is looked for when a message carries a Pix code.
const CHARGE_LOOKBACK: chrono::TimeDelta = chrono::TimeDelta::days(30);

#[derive(Deserialize)]
pub struct EventsQuery {
    wa_id: String,
    #[serde(default)]
    after: i64,
}

struct Cursor {
    state: AppState,
    tenant: TenantId,
    wa_id: String,
    last: i64,
    ready: VecDeque<Event>,
    ends_at: tokio::time::Instant,
}

pub async fn events(
    State(state): State<AppState>,
    headers: HeaderMap,
    admin: Result<Admin, ConsoleError>,
    Path(slug): Path<String>,
    Query(q): Query<EventsQuery>,
) -> Result<Sse<impl Stream<Item = Result<Event, std::convert::Infallible>>>, SimError> {
    let tenant = access(&state, &headers, admin, &slug).await?;
    let phone = PhoneE164::parse(&q.wa_id).map_err(|e| ApiError::BadRequest(e.to_string()))?;
    let resumed = headers.get("last-event-id").and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<i64>().ok());
    let cursor = Cursor {
        state,
        tenant: tenant.id,
        wa_id: phone.digits().to_owned(),
        last: q.after.max(resumed.unwrap_or(0)),
        ready: VecDeque::new(),
        ends_at: tokio::time::Instant::now() + LIFETIME,
    };
    let stream = futures::stream::unfold(cursor, |mut cursor| async move {
        loop {
            if let Some(event) = cursor.ready.pop_front() {
                return Some((Ok(event), cursor));
            }
            match next_batch(&cursor).await {
                Ok(events) if !events.is_empty() => {
                    cursor.last = events.last().map_or(cursor.last, |(id, _)| *id);
                    cursor.ready.extend(events.into_iter().map(|(_, e)| e));
                    continue;
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "simulator events: reading the outbox failed; the browser reconnects");
                    return None;
                }
            }
            tokio::select! {
                () = tokio::time::sleep(POLL) => {}
                () = tokio::time::sleep_until(cursor.ends_at) => return None,
                () = cursor.state.stopping.cancelled() => return None,
            }
        }
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}

/// The events of the rows after the cursor, with their ids.
async fn next_batch(cursor: &Cursor) -> anyhow::Result<Vec<(i64, Event)>> {
    let rows = cursor.state.store.outbound_for_wa_id(cursor.tenant, &cursor.wa_id, cursor.last).await?;
    if rows.is_empty() {
        return Ok(Vec::new());
    }
    let charges = if rows.iter().any(|r| pix_code(&r.message.0).is_some()) {
        let since = chrono::Utc::now() - CHARGE_LOOKBACK;
        cursor.state.store.charges(cursor.tenant, None, since, 500).await?
    } else {
        Vec::new()
    };
    rows.iter()
        .map(|row| {
            let charge = pix_code(&row.message.0)
                .and_then(|code| charges.iter().find(|c| c.copia_e_cola == code))
                .map(charge_json);
            Ok((row.id, Event::default().event("message").id(row.id.to_string()).json_data(data(row, charge))?))
        })
        .collect()
}

fn data(row: &OutboundRecord, charge: Option<Value>) -> Value {
    json!({ "id": row.id, "status": row.status, "wamid": row.provider_message_id,
            "message": row.message.0, "charge": charge })
}

/// The Pix code a message carries: an order's, a QR image's, a text that is one (a charge
/// sent as text sends its code alone), or a template's parameter (a charge sent outside the
/// 24-hour window).
fn pix_code(message: &OutboundMessage) -> Option<&str> {
    match message {
        OutboundMessage::OrderDetails { copia_e_cola, .. } => Some(copia_e_cola),
        OutboundMessage::QrImage { payload, .. } => Some(payload),
        OutboundMessage::Text { body } if body.starts_with(BR_CODE_START) => Some(body),
        OutboundMessage::Template { body_params, .. } => {
            body_params.iter().map(String::as_str).find(|p| p.starts_with(BR_CODE_START))
        }
        _ => None,
    }
}

/// How every BR Code begins: its payload format indicator, `00 02 01`.
const BR_CODE_START: &str = "000201";
