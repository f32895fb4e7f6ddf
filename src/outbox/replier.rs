//! Writes a turn's replies to the outbox under keys derived from the turn, fenced by the
//! turn's job lease.

use std::sync::Arc;

use anyhow::Context;
use chrono::Utc;
use tokio::sync::Notify;

use super::{NewOutbound, OutboxKey};
use crate::domain::Secret;
use crate::jobs::Turn;
use crate::store::{OutboxStore, Store};
use crate::whatsapp::OutboundMessage;

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
            written_by: Some(turn.lease.clone()),
        };
        let inserted = self
            .store
            .enqueue_outbound(&new, self.store.db_time(Utc::now()))
            .await
            .context("failed to queue a reply")?;
        if inserted.is_some() && !local {
            self.notify.notify_one();
        }
        Ok(inserted.is_some())
    }
}
