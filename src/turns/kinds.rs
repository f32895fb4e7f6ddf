//! What each kind of inbound message gets: the policy, in one place (the README's "Message
//! kinds" table is this file's).
//!
//! | kind | stored | answered |
//! |---|---|---|
//! | text, taps, quick replies | yes | by the agent |
//! | reaction (added or removed) | yes, with its emoji | never: a 👍 confirms nothing (money and cancellations are button-only) |
//! | edit | yes | no, when its message's turn has not run: that message's text is replaced; else as a new message marked edited |
//! | revoke (deletion) | yes; the deleted message's text is removed | never (and the deleted message is not answered if still waiting) |
//! | system: number changed | yes | never; the contact moves to the new number (same contact, bookings, history) |
//! | other system notices | yes | never |
//! | request_welcome | yes | the welcome |
//! | image, video, document, sticker, location, contacts | yes, with caption or label | once per turn: the guided menu says what it can do; the model reads "[o cliente enviou uma imagem: …]" |
//! | audio, voice note | yes, with its transcript once heard | its transcript, like typed text; "não consegui ouvir seu áudio, pode escrever?" when it could not be heard; a request to write when no endpoint is configured |
//! | unsupported, error-only (131000, 131051) | yes, with Meta's error code | like unreadable media |
//!
//! A [`TurnHandler`] outermost on turns (clicks go their own way): it applies the effects, hands
//! the wrapped chain only the messages to answer (a voice note as its transcript, kind `text`,
//! so opt-out, handoff and the menus read it as typed), and ends a turn with nothing to answer
//! without a reply. Every effect is idempotent, so a retried turn repeats nothing.

use std::sync::Arc;

use async_trait::async_trait;

use super::voice::{Heard, Voice};
use crate::domain::PhoneE164;
use crate::jobs::{Replier, Turn, TurnHandler};
use crate::messages::{KindsText, kinds};
use crate::store::{InboundMessage, JobKind, MessageEffectStore, NumberMoved, Store};
use crate::whatsapp::{OutboundMessage, stored};

/// What a stored kind does to its turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// Stored, never answered.
    Silent,
    /// Removes its message's text.
    Revoke,
    /// Replaces its message's text, or is answered as a new message.
    Edit,
    /// Moves the contact to a new number.
    NumberChange,
    /// Transcribed, then answered as text.
    Voice,
    /// Answered by the agent.
    Answer,
}

/// The policy for a stored kind (`inbound_messages.kind`).
pub fn policy(kind: &str) -> Policy {
    match kind {
        "reaction" | "system" => Policy::Silent,
        "revoke" => Policy::Revoke,
        "edit" => Policy::Edit,
        stored::NUMBER_CHANGE => Policy::NumberChange,
        "audio" => Policy::Voice,
        _ => Policy::Answer,
    }
}

/// Applies the kinds' policy, then hands the messages to answer to `inner`.
pub struct MessageKinds {
    pub store: Store,
    pub replier: Replier,
    pub voice: Arc<Voice>,
    pub inner: Arc<dyn TurnHandler>,
}

/// A voice note nobody could hear, as the turn keeps it: kind `audio`, no text.
fn unheard(message: &InboundMessage) -> bool {
    message.kind == "audio" && message.body.is_none()
}

impl MessageKinds {
    /// The turn's messages to answer, after each kind's effect.
    async fn to_answer(&self, turn: &Turn) -> anyhow::Result<(Vec<InboundMessage>, bool)> {
        let (tenant, conversation) = (turn.tenant.id, turn.conversation);
        let mut answer: Vec<InboundMessage> = Vec::new();
        let mut no_endpoint = false;
        for message in &turn.messages {
            match policy(&message.kind) {
                Policy::Silent => {}
                Policy::Revoke => {
                    if let Some(target) = &message.context_id {
                        self.store.revoke_message(tenant, conversation, target).await?;
                        answer.retain(|m| &m.provider_message_id != target);
                    }
                }
                Policy::Edit => {
                    let waiting = answer
                        .iter_mut()
                        .find(|m| m.kind == "text" && message.context_id.as_ref() == Some(&m.provider_message_id));
                    match (waiting, &message.body, &message.context_id) {
                        (Some(original), Some(body), Some(target)) => {
                            self.store.edit_message(tenant, conversation, target, turn.id, body).await?;
                            original.body = Some(body.clone());
                        }
                        (Some(_), None, _) => {} // an edit with no text (a caption removed)
                        _ => answer.push(message.clone()),
                    }
                }
                Policy::NumberChange => {
                    let Some(number) = message.body.as_deref().and_then(|b| PhoneE164::parse(b).ok()) else {
                        continue;
                    };
                    let moved = self.store.move_contact_number(tenant, turn.contact.contact_id, &number).await?;
                    match moved {
                        NumberMoved::Moved => {
                            tracing::info!(%tenant, contact = %turn.contact.contact_id, "contact moved to its new number")
                        }
                        NumberMoved::Unchanged => {}
                        NumberMoved::Taken(other) => {
                            tracing::warn!(%tenant, contact = %turn.contact.contact_id, %other, "a number change names a number another contact has; both kept")
                        }
                    }
                }
                Policy::Voice => {
                    let mut heard = message.clone();
                    match self.voice.hear(turn, message).await? {
                        Heard::Text(text) => {
                            heard.kind = "text".to_owned();
                            heard.body = Some(text);
                        }
                        Heard::Failed => heard.body = None,
                        Heard::NoEndpoint => {
                            heard.body = None;
                            no_endpoint = true;
                        }
                    }
                    answer.push(heard);
                }
                Policy::Answer => answer.push(message.clone()),
            }
        }
        Ok((answer, no_endpoint))
    }
}

#[async_trait]
impl TurnHandler for MessageKinds {
    async fn handle(&self, turn: &Turn) -> anyhow::Result<()> {
        if turn.kind == JobKind::Click {
            return self.inner.handle(turn).await;
        }
        let (answer, no_endpoint) = self.to_answer(turn).await?;
        if answer.is_empty() {
            return Ok(());
        }
        // Voice notes and nothing else, none heard: the same answer from every agent, no model.
        if answer.iter().all(unheard) {
            let text = kinds(if no_endpoint { KindsText::NoVoice } else { KindsText::CouldNotHear })?;
            self.replier.reply(turn, 0, OutboundMessage::text(text)?);
            return Ok(());
        }
        self.inner.handle(&turn.with_messages(answer)).await
    }
}
