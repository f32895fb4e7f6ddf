//! `POST /simulator/api/tenants/{slug}/messages`: the page's customer (or staff member) sends a
//! text, taps a reply or sends the simulator's voice note.
//!
//! Nothing is simulated below the webhook's signature check: the body is the payload Meta would
//! send ([`crate::simulator::payload`]), parsed and stored by the webhook's own intake
//! (deduplicated by its id, the turn enqueued, the workers woken). It is not signed and posted
//! as if from Meta: each message is marked with who sent it here (the admin's e-mail), so a tap
//! on a staff button is recorded as that admin's, never as the staff phone's it plays.
//!
//! A tap names the message it answers (`context.id`) as WhatsApp does: the outbox row's wamid
//! when it was sent, else (local mode, nothing sent) `wamid.local.<row id>`; intake stores it
//! and nothing relies on it matching.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{SimError, viewing};
use crate::domain::PhoneE164;
use crate::http::console::ConsoleError;
use crate::http::console::auth::Admin;
use crate::http::{ApiError, AppState};
use crate::simulator::payload::{self, Content, Reply, ReplyKind};

/// WhatsApp's own limit on a text message.
const TEXT_MAX: usize = 4096;
/// A profile name longer than this is cut (WhatsApp's are short).
const NAME_MAX: usize = 100;

#[derive(Deserialize)]
pub struct SendRequest {
    /// The sender's number, `+5511…` or digits.
    from: String,
    #[serde(default)]
    name: String,
    text: Option<String>,
    reply: Option<ReplyRequest>,
    /// Send the simulator's voice note instead.
    #[serde(default)]
    voice: bool,
    /// Reuse a message id (a redelivery); a fresh one otherwise.
    id: Option<String>,
}

#[derive(Deserialize)]
pub struct ReplyRequest {
    id: String,
    title: String,
    kind: ReplyKind,
    /// The wamid of the message tapped.
    context: Option<String>,
}

pub async fn send(
    State(state): State<AppState>,
    headers: HeaderMap,
    admin: Result<Admin, ConsoleError>,
    Path(slug): Path<String>,
    Json(request): Json<SendRequest>,
) -> Result<Json<Value>, SimError> {
    let (viewer, tenant) = viewing(&state, &headers, admin, &slug).await?;
    let bad = |reason: &str| SimError::Api(ApiError::BadRequest(reason.to_owned()));
    let from = PhoneE164::parse(&request.from).map_err(|e| bad(&e.to_string()))?;
    let content = match (request.text, request.reply) {
        (None, None) if request.voice => Content::VoiceNote,
        (Some(_), _) | (_, Some(_)) if request.voice => return Err(bad("send either text, reply or voice")),
        (Some(text), None) => {
            let text = text.trim();
            if text.is_empty() || text.chars().count() > TEXT_MAX {
                return Err(bad("text must have between 1 and 4096 characters"));
            }
            Content::Text(text.to_owned())
        }
        (None, Some(r)) => {
            if r.id.is_empty() || r.id.len() > 256 || r.title.chars().count() > 100 {
                return Err(bad("a reply needs an id of at most 256 bytes and a short title"));
            }
            Content::Reply(Reply { kind: r.kind, id: r.id, title: r.title, context: r.context })
        }
        _ => return Err(bad("send either text or reply")),
    };
    let wamid = match request.id {
        Some(id) if !id.is_empty() && id.len() <= 128 => id,
        Some(_) => return Err(bad("id must have between 1 and 128 bytes")),
        None => format!("wamid.sim.{}", uuid::Uuid::new_v4().simple()),
    };
    let name: String = request.name.trim().chars().take(NAME_MAX).collect();
    let name = if name.is_empty() { "Cliente".to_owned() } else { name };
    let message = payload::message(from.digits(), &wamid, chrono::Utc::now().timestamp(), &content);
    let body = payload::envelope(&tenant.phone_number_id, from.digits(), &name, message);
    let status = crate::http::whatsapp_webhook::store(&state, &body, Some(&viewer.label(&state))).await?;
    if status != StatusCode::OK {
        return Err(ApiError::Internal(anyhow::anyhow!("the webhook answered {status}")).into());
    }
    Ok(Json(json!({ "id": wamid })))
}
