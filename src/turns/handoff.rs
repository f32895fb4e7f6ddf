//! Human handoff: a person at the business takes a customer's conversation over, and the bot
//! stays quiet until they give it back or the conversation goes idle.
//!
//! Invariants:
//! - while `handoff_until` is in the future a customer's turn completes without answering:
//!   no model call, no reply (the messages stay in the transcript), and each customer message
//!   pushes the end forward by the idle time, so a forgotten handoff ends by itself;
//! - a takeover that lands while a turn is already answering (a model call in flight) still
//!   silences it: the turn's text replies are queued only if no person has the conversation,
//!   checked in the turn's end transaction ([`crate::jobs::Turn::yields_to_person`]); what
//!   its tools already did stays done, through the ledger;
//! - a customer who writes "atendente" (a word of the message, whatever the case or accents)
//!   is told a person was called, the conversation is flagged and handed over, and the staff
//!   are notified once per request: every message is keyed by the turn, so a retried turn
//!   queues nothing twice;
//! - only the customer-turn handler is wrapped: staff conversations and button clicks never
//!   reach it, so they are never handed off.

use std::sync::Arc;

use anyhow::Context;
use askama::Template;
use async_trait::async_trait;
use chrono::{TimeDelta, Utc};

use super::HandlerContext;
use crate::domain::{ConversationId, to_delta};
use crate::jobs::{Replier, Turn, TurnHandler};
use crate::store::{HandoffStore, InboundMessage, OutboxStore, Store, TenantStore};
use crate::whatsapp::OutboundMessage;
use crate::whatsapp::message::clip;

/// What the customer types to ask for a person, once normalized ([`crate::domain::keyword::fold`]).
const ASK_FOR_PERSON: &str = "atendente";

/// The handoff's pt-BR texts.
#[derive(Template)]
#[template(path = "messages/handoff.txt")]
struct Handoff<'a> {
    text: HandoffText<'a>,
}

enum HandoffText<'a> {
    /// The answer to "atendente".
    Customer { business: &'a str },
    /// To each staff number: who asked.
    Staff { conversation: i64, customer: &'a str },
}

fn render(text: HandoffText<'_>) -> anyhow::Result<String> {
    Ok(Handoff { text }.render()?.trim().to_owned())
}

/// A first name longer than this is cut (a profile name is the customer's own text).
const FIRST_NAME_MAX: usize = 30;

/// Whether the message asks for a person: "atendente" as a word of it ("quero falar com um
/// atendente", "Atendente!"), as the menus tell customers to write.
fn asks_for_person(message: &InboundMessage) -> bool {
    message.kind == "text"
        && message.body.as_deref().is_some_and(|b| {
            crate::domain::keyword::fold(b).split(|c: char| !c.is_alphanumeric()).any(|w| w == ASK_FOR_PERSON)
        })
}

/// Wraps the customer-turn handler.
pub struct HandoffGate {
    store: Store,
    replier: Replier,
    idle: TimeDelta,
    inner: Arc<dyn TurnHandler>,
}

impl HandoffGate {
    pub fn wrap(inner: Arc<dyn TurnHandler>, ctx: &HandlerContext) -> Arc<dyn TurnHandler> {
        Arc::new(Self {
            store: ctx.store.clone(),
            replier: ctx.replier.clone(),
            idle: to_delta(ctx.config.handoff_idle),
            inner,
        })
    }

    /// Tells every staff number who asked for a person, once per request (the turn).
    async fn notify_staff(&self, turn: &Turn) -> anyhow::Result<()> {
        let tenant = &turn.tenant;
        // Who asked, by the first name they gave WhatsApp only: enough for the staff to know whom
        // to answer, while a message on a staff phone can never be erased (their number and the
        // rest stay in the console, which an erasure clears).
        let first_name = turn.contact.profile_name.as_deref().and_then(|n| n.split_whitespace().next());
        let customer = first_name.map_or_else(|| "Um cliente".to_owned(), |name| clip(name, FIRST_NAME_MAX));
        let text = OutboundMessage::text(render(HandoffText::Staff {
            conversation: turn.conversation.0,
            customer: &customer,
        })?)?;
        let now = self.store.db_time(Utc::now());
        let mut queued = false;
        for staff in self.store.staff(tenant.id).await? {
            let conversation: ConversationId = self.store.conversation_for_phone(tenant.id, &staff, now).await?;
            let destination = self.replier.destination(tenant, conversation).await?;
            let key = format!("handoff:{}:{}", turn.id, conversation);
            if let Some(new) = destination.message(key, text.clone()) {
                queued |= self.store.enqueue_outbound(&new, now).await?.is_some() && !new.local;
            }
        }
        if queued {
            self.replier.wake();
        }
        Ok(())
    }
}

#[async_trait]
impl TurnHandler for HandoffGate {
    async fn handle(&self, turn: &Turn) -> anyhow::Result<()> {
        let tenant = &turn.tenant;
        let now = self.store.db_time(Utc::now());
        let until = now + self.idle;
        if turn.messages.iter().any(asks_for_person) {
            self.store.request_handoff(tenant.id, turn.conversation, now, until).await?;
            let answer = render(HandoffText::Customer { business: &tenant.name })?;
            self.replier.reply(turn, 0, OutboundMessage::text(answer)?);
            self.notify_staff(turn).await.context("failed to notify the staff of a handoff request")?;
            tracing::info!(conversation = %turn.conversation, "the customer asked for a person");
            return Ok(());
        }
        let state = self.store.handoff_state(tenant.id, turn.conversation).await?;
        if state.is_active(now) {
            self.store.extend_handoff(tenant.id, turn.conversation, now, until).await?;
            tracing::info!(conversation = %turn.conversation, "a person has the conversation; the bot stays quiet");
            return Ok(());
        }
        // A takeover from now until the answer is queued still silences it.
        let mut yielding = turn.clone();
        yielding.yields_to_person = true;
        self.inner.handle(&yielding).await
    }
}

#[cfg(test)]
mod tests {
    use crate::domain::keyword::fold as normalize;

    #[test]
    fn atendente_is_recognized_however_it_is_typed() {
        for typed in
            ["atendente", "Atendente", "  ATENDENTE!! ", "atendênte", "Atêndente.", "\"atendente\"", "¿atendente?"]
        {
            assert_eq!(normalize(typed), "atendente", "{typed:?}");
        }
        for other in ["atendentes", "quero um atendente", "aten dente", ""] {
            assert_ne!(normalize(other), "atendente", "{other:?}");
        }
    }
}
