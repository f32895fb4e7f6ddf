//! The console's side of human handoff: take a conversation over, give it back to the bot,
//! reply as a person. Each checks the CSRF token first, then acts only on a conversation of
//! the admin's tenant.

use axum::Form;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Redirect, Response};
use chrono::Utc;
use serde::Deserialize;

use super::load;
use crate::domain::ConversationId;
use crate::http::AppState;
use crate::http::console::auth::Admin;
use crate::http::console::error::ConsoleError;
use crate::store::{ChargeStore, HandoffStore, OutboxStore};
use crate::whatsapp::OutboundMessage;

fn back(slug: &str, id: i64) -> Response {
    Redirect::to(&format!("/admin/{slug}/conversations/{id}")).into_response()
}

pub async fn take_over(
    State(state): State<AppState>,
    admin: Admin,
    Path((slug, id)): Path<(String, i64)>,
) -> Result<Response, ConsoleError> {
    let (tenant, _) = load(&state, &admin, &slug, id).await?;
    let until = state.store.db_time(Utc::now()) + state.handoff_idle;
    state.store.take_over(tenant.id, ConversationId(id), until).await?;
    tracing::info!(admin = admin.id, conversation = id, "a person took the conversation over");
    Ok(back(&slug, id))
}

pub async fn release(
    State(state): State<AppState>,
    admin: Admin,
    Path((slug, id)): Path<(String, i64)>,
) -> Result<Response, ConsoleError> {
    let (tenant, _) = load(&state, &admin, &slug, id).await?;
    state.store.release_handoff(tenant.id, ConversationId(id)).await?;
    tracing::info!(admin = admin.id, conversation = id, "the conversation went back to the bot");
    Ok(back(&slug, id))
}

#[derive(Deserialize)]
pub struct ReplyForm {
    #[serde(default)]
    text: String,
    /// Drawn when the form was rendered: the same submission twice is one message.
    #[serde(default)]
    reply_key: String,
}

/// A `reply_key` as the page draws it: 32 hex digits.
fn valid_reply_key(key: &str) -> bool {
    key.len() == 32 && key.bytes().all(|b| b.is_ascii_hexdigit())
}

pub async fn reply(
    State(state): State<AppState>,
    admin: Admin,
    Path((slug, id)): Path<(String, i64)>,
    Form(form): Form<ReplyForm>,
) -> Result<Response, ConsoleError> {
    let (tenant, _) = load(&state, &admin, &slug, id).await?;
    let text = form.text.trim();
    if text.is_empty() {
        return Err(ConsoleError::BadRequest("Escreva a mensagem antes de enviar.".to_owned()));
    }
    if !valid_reply_key(&form.reply_key) {
        return Err(ConsoleError::BadRequest("Formulário inválido. Recarregue a página.".to_owned()));
    }
    let message = OutboundMessage::text(text)
        .map_err(|e| ConsoleError::BadRequest(format!("Mensagem não pode ser enviada: {e}")))?;
    let conversation = ConversationId(id);
    let now = state.store.db_time(Utc::now());
    // WhatsApp refuses free-form messages 24 hours after the customer's last one: say so now
    // rather than queue a send that will fail.
    if !crate::money::charges::inside_window(state.store.last_inbound_at(tenant.id, conversation).await?, now) {
        return Err(ConsoleError::BadRequest(
            "A última mensagem do cliente tem mais de 24 horas: o WhatsApp só permite mensagens livres dentro dessa janela. Fale com o cliente por outro meio.".to_owned(),
        ));
    }
    let destination = state.replier.destination(&tenant, conversation).await?;
    let new = destination
        .message(format!("console:{id}:{}", form.reply_key), message)
        .ok_or_else(|| ConsoleError::Internal(anyhow::anyhow!("invalid console reply key")))?;
    let queued = state.store.enqueue_outbound(&new, now).await?.is_some();
    // A person answering has the conversation: the bot stays quiet for the idle time.
    state.store.take_over(tenant.id, conversation, now + state.handoff_idle).await?;
    if queued && !new.local {
        state.replier.wake();
    }
    tracing::info!(admin = admin.id, conversation = id, queued, "console reply");
    Ok(back(&slug, id))
}
