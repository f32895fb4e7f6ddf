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
//! Two handlers apply it. [`MessageKinds`], outermost on turns (taps go their own way), applies
//! the effects and hears voice notes, and hands the chain only the messages to answer (a heard
//! voice note as kind `text`, so opt-out, handoff and the menus read it as typed); a turn with
//! nothing left ends without a reply. [`UnheardVoice`], inside the handoff gate, answers a turn
//! of voice notes nobody could hear: a person who took the conversation over hears no bot.
//!
//! Invariants: every effect is idempotent, so a retried turn repeats nothing; the effects that
//! write a customer's words (an edit, a transcript, a new number) are made under the turn's
//! lease, so a turn an erasure stopped cannot write them back; a deleted voice note is never
//! sent for transcription.

use std::sync::Arc;

use async_trait::async_trait;

use super::voice::{Heard, Voice};
use crate::domain::PhoneE164;
use crate::jobs::{Replier, Turn, TurnHandler};
use crate::messages::{InboundLine, render, unheard_voice};
use crate::store::{InboundMessage, MessageEffectStore, NumberMoved, Store};
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
        stored::REACTION | stored::SYSTEM => Policy::Silent,
        stored::REVOKE => Policy::Revoke,
        stored::EDIT => Policy::Edit,
        stored::NUMBER_CHANGE => Policy::NumberChange,
        stored::AUDIO => Policy::Voice,
        _ => Policy::Answer,
    }
}

/// Applies the kinds' policy, then hands the messages to answer to `inner`.
pub struct MessageKinds {
    pub store: Store,
    pub voice: Arc<Voice>,
    pub inner: Arc<dyn TurnHandler>,
}

impl MessageKinds {
    /// The turn's messages to answer, after each kind's effect.
    async fn to_answer(&self, turn: &Turn) -> anyhow::Result<Vec<InboundMessage>> {
        let (tenant, conversation) = (turn.tenant.id, turn.conversation);
        // Deleted in this very turn: never answered, never sent for transcription.
        let revoked: Vec<&str> = turn
            .messages
            .iter()
            .filter(|m| policy(&m.kind) == Policy::Revoke)
            .filter_map(|m| m.context_id.as_deref())
            .collect();
        let mut answer: Vec<InboundMessage> = Vec::new();
        for message in &turn.messages {
            match policy(&message.kind) {
                Policy::Silent => {}
                Policy::Revoke => {
                    if let Some(target) = &message.context_id {
                        let placeholder = render(&InboundLine { kind: stored::REVOKE, label: None, error_code: None })?;
                        self.store.revoke_message(tenant, conversation, target, &placeholder).await?;
                    }
                }
                _ if revoked.contains(&message.provider_message_id.as_str()) => {}
                Policy::Edit => {
                    let target = message.context_id.as_deref();
                    let waiting =
                        answer.iter_mut().find(|m| m.kind == stored::TEXT && target == Some(&m.provider_message_id));
                    match (waiting, &message.body, target) {
                        (Some(original), Some(body), Some(target)) => {
                            self.store.edit_message(tenant, conversation, target, &turn.lease, body).await?;
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
                    let contact = turn.contact.contact_id;
                    match self.store.move_contact_number(tenant, contact, &number, &turn.lease).await? {
                        NumberMoved::Moved => tracing::info!(%tenant, %contact, "contact moved to its new number"),
                        NumberMoved::Unchanged => {}
                        NumberMoved::Taken(other) => {
                            let other = other.map(|c| c.0);
                            tracing::warn!(%tenant, %contact, ?other, "a number change names another contact's number; both kept")
                        }
                    }
                }
                Policy::Voice => {
                    let mut heard = message.clone();
                    match self.voice.hear(turn, message).await? {
                        Heard::Text(text) => {
                            heard.kind = stored::TEXT.to_owned();
                            heard.body = Some(text);
                        }
                        Heard::Failed(reason) => {
                            heard.body = None;
                            heard.transcript_error = Some(reason);
                        }
                        Heard::NoEndpoint => heard.body = None,
                    }
                    answer.push(heard);
                }
                Policy::Answer => answer.push(message.clone()),
            }
        }
        Ok(answer)
    }
}

#[async_trait]
impl TurnHandler for MessageKinds {
    async fn handle(&self, turn: &Turn) -> anyhow::Result<()> {
        let answer = self.to_answer(turn).await?;
        if answer.is_empty() {
            return Ok(());
        }
        self.inner.handle(&turn.with_messages(answer)).await
    }
}

/// Answers a turn of voice notes and nothing else, none heard, the same way for every agent and
/// without the model: "Não consegui ouvir seu áudio, pode escrever?" (or, with no endpoint, a
/// request to write). Every other turn goes to `inner`.
pub struct UnheardVoice {
    pub replier: Replier,
    pub inner: Arc<dyn TurnHandler>,
}

impl UnheardVoice {
    pub fn wrap(replier: Replier, inner: Arc<dyn TurnHandler>) -> Arc<dyn TurnHandler> {
        Arc::new(Self { replier, inner })
    }
}

#[async_trait]
impl TurnHandler for UnheardVoice {
    async fn handle(&self, turn: &Turn) -> anyhow::Result<()> {
        let unheard: Option<Vec<bool>> = turn.messages.iter().map(InboundMessage::unheard_voice).collect();
        match unheard {
            Some(failed) if !failed.is_empty() => {
                let text = unheard_voice(failed.contains(&true))?;
                self.replier.reply(turn, 0, OutboundMessage::text(text)?);
                Ok(())
            }
            _ => self.inner.handle(turn).await,
        }
    }
}
