//! Queues a turn's replies under keys derived from the turn. They are staged on the turn and
//! written at its end with the job's completion, in one transaction fenced by the turn's job
//! lease (see [`crate::jobs::TurnEnd`]); rows queued outside a turn are written at once.

use std::sync::Arc;

use tokio::sync::Notify;

use super::Turn;
use crate::domain::{ConversationId, Secret};
use crate::store::{Destination, InboundStore, NewOutbound, OutboxKey, Store, StoreResult};
use crate::tenant::Tenant;
use crate::whatsapp::{OutboundMessage, Recipient};

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

    /// Whether messages for `tenant` stay in the outbox (local mode, or no token to send with).
    pub fn is_local(&self, tenant: &Tenant) -> bool {
        self.is_local_for(tenant.access_token.is_some())
    }

    /// [`Self::is_local`] for a tenant known only by whether it has its own token.
    pub fn is_local_for(&self, own_token: bool) -> bool {
        self.local_mode || (!own_token && self.default_token.is_none())
    }

    /// Where messages to `conversation` go, outside a turn.
    pub async fn destination(&self, tenant: &Tenant, conversation: ConversationId) -> StoreResult<Destination> {
        let contact = self.store.conversation_contact(tenant.id, conversation).await?;
        Ok(Destination {
            tenant: tenant.id,
            conversation,
            recipient: Recipient { wa_id: contact.wa_id, user_id: contact.user_id },
            local: self.is_local(tenant),
        })
    }

    /// Wakes the outbox sender after rows were queued outside [`Self::reply`].
    pub fn wake(&self) {
        self.notify.notify_one();
    }

    /// Stages the `seq`-th reply of the turn for its end; a rerun with the same `seq` inserts
    /// nothing. Whether a person has the conversation (for a turn that yields to one) is
    /// checked in the end's transaction; the worker wakes the sender once the end commits.
    pub fn reply(&self, turn: &Turn, seq: u32, message: OutboundMessage) {
        self.reply_once(turn, OutboxKey::for_turn(turn.id, seq), message);
    }

    /// Stages a reply under `key` instead of the turn's own: what several turns may each have
    /// to say, once in all (an action's outcome, told by whichever click found it done).
    pub fn reply_once(&self, turn: &Turn, key: OutboxKey, message: OutboundMessage) {
        turn.stage_reply(NewOutbound {
            tenant: turn.tenant.id,
            conversation: turn.conversation,
            key,
            // Outside local mode, a reply without any token to send it with also stays local.
            local: self.is_local(&turn.tenant),
            recipient: turn.recipient(),
            message,
            written_by: Some(turn.lease.clone()),
            unless_handed_off: turn.yields_to_person,
        });
    }
}
