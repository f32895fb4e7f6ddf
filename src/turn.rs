//! A turn: the conversation's messages a job answers, and the handler that answers them.
//!
//! The handler may run more than once for the same turn (a retry after a crash or a lost
//! lease). Everything it does must be keyed by the turn, as the outbox key is, so a rerun
//! repeats nothing.

use std::sync::Arc;

use anyhow::Context;
use async_trait::async_trait;
use chrono::Utc;
use tokio::sync::Notify;

use crate::config::Secret;
use crate::domain::{ConversationId, JobId};
use crate::inbound::{ConversationContact, InboundMessage};
use crate::ledger::CallContext;
use crate::outbox::{NewOutbound, OutboxKey};
use crate::store::{OutboxStore, Store};
use crate::tenant::Tenant;
use crate::whatsapp::{OutboundMessage, Recipient};

/// Everything a handler needs about the turn; identical on every attempt.
#[derive(Debug, Clone)]
pub struct Turn {
    pub id: JobId,
    pub attempt: i64,
    pub tenant: Tenant,
    pub conversation: ConversationId,
    pub contact: ConversationContact,
    pub messages: Vec<InboundMessage>,
    pub trigger_message_id: Option<String>,
}

impl Turn {
    /// The context a tool call made in this turn runs with.
    pub fn call_context<'a>(&'a self, tool_use_id: Option<&'a str>) -> CallContext<'a> {
        CallContext {
            tenant: &self.tenant,
            customer: self.contact.contact_id,
            conversation: self.conversation,
            turn: Some(self.id),
            trigger_message_id: self.trigger_message_id.as_deref(),
            tool_use_id,
            now: Utc::now(),
        }
    }

    pub fn recipient(&self) -> Recipient {
        Recipient { wa_id: self.contact.wa_id.clone(), user_id: self.contact.user_id.clone() }
    }
}

/// Answers a turn. Errors are retried by the queue with backoff.
#[async_trait]
pub trait TurnHandler: Send + Sync {
    async fn handle(&self, turn: &Turn) -> anyhow::Result<()>;
}

/// Writes a turn's replies to the outbox under keys derived from the turn.
#[derive(Clone)]
pub struct Replier {
    store: Store,
    default_token: Option<Secret>,
    /// The process-wide local mode, fixed at start: a token a tenant gains later never makes
    /// a local-mode server (whose webhook secret is public) send.
    local_mode: bool,
    notify: Arc<Notify>,
}

impl Replier {
    pub fn new(store: Store, default_token: Option<Secret>, local_mode: bool, notify: Arc<Notify>) -> Self {
        Self { store, default_token, local_mode, notify }
    }

    /// Queues the `seq`-th reply of the turn; a rerun with the same `seq` inserts nothing.
    pub async fn reply(&self, turn: &Turn, seq: u32, message: OutboundMessage) -> anyhow::Result<bool> {
        // Outside local mode, a reply without any token to send it with also stays local.
        let local = self.local_mode || (turn.tenant.access_token.is_none() && self.default_token.is_none());
        let new = NewOutbound {
            tenant: turn.tenant.id,
            conversation: turn.conversation,
            key: OutboxKey::for_turn(turn.id, seq),
            recipient: turn.recipient(),
            message,
            local,
        };
        let inserted = self.store.enqueue_outbound(&new, Utc::now()).await.context("failed to queue a reply")?;
        if inserted.is_some() && !local {
            self.notify.notify_one();
        }
        Ok(inserted.is_some())
    }
}
