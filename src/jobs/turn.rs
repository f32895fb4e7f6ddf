//! A turn: the conversation's messages a job answers, and the handler that answers them.
//!
//! The handler may run more than once for the same turn (a retry after a crash or a lost
//! lease). Everything it does must be keyed by the turn, as the outbox key is, so a rerun
//! repeats nothing. Its replies and history are staged on the turn ([`Turn::stage_reply`],
//! [`Turn::stage_history`]) and written at the turn's end, with the job's completion, in one
//! transaction (see [`super::end`]).

use std::sync::Arc;

use async_trait::async_trait;
use chrono::Utc;

use super::end::Staged;
use super::{TurnEnd, TurnHistory};
use crate::domain::{ConversationId, JobId};
use crate::ledger::CallContext;
use crate::store::{ConversationContact, InboundMessage, JobKind, Lease, NewOutbound};
use crate::tenant::Tenant;
use crate::whatsapp::Recipient;

/// Everything a handler needs about the turn; identical on every attempt.
#[derive(Debug, Clone)]
pub struct Turn {
    pub id: JobId,
    /// A turn over messages, or one click on a pending action.
    pub kind: JobKind,
    pub tenant: Tenant,
    pub conversation: ConversationId,
    pub contact: ConversationContact,
    pub messages: Vec<InboundMessage>,
    pub trigger_message_id: Option<String>,
    /// The job lease this attempt holds: the turn's end (replies, history, completion) is
    /// refused once it is lost, so a stale worker cannot add to a turn another attempt owns.
    pub lease: Lease,
    /// This attempt is the job's last: a failure now is final (the job goes dead), so what can
    /// only be retried (a voice note whose transcriber is down) is settled instead.
    pub last_attempt: bool,
    /// The bot's replies in this turn are dropped if a person takes the conversation over
    /// before the turn ends (set by the handoff gate on customer turns; checked in the end's
    /// transaction, so a takeover during a model call silences its answer).
    pub yields_to_person: bool,
    /// What the turn writes at its end; clones of the turn share it.
    pub(super) staged: Arc<Staged>,
}

impl Turn {
    /// The context a tool call made in this turn runs with.
    pub fn call_context<'a>(&'a self, tool_use_id: Option<&'a str>) -> CallContext<'a> {
        CallContext {
            tenant: &self.tenant,
            customer: self.contact.contact_id,
            conversation: self.conversation,
            turn: Some(self.id),
            turn_attempt: Some(self.lease.attempt),
            trigger_message_id: self.trigger_message_id.as_deref(),
            tool_use_id,
            now: Utc::now(),
        }
    }

    pub fn recipient(&self) -> Recipient {
        Recipient { wa_id: self.contact.wa_id.clone(), user_id: self.contact.user_id.clone() }
    }

    /// The same turn over `messages` (what is left to answer once each kind's policy ran); its
    /// staged end is shared.
    pub fn with_messages(&self, messages: Vec<InboundMessage>) -> Self {
        Self { messages, ..self.clone() }
    }

    /// Queues a reply for the turn's end (see [`crate::jobs::Replier::reply`]).
    pub fn stage_reply(&self, reply: NewOutbound) {
        self.staged.reply(reply);
    }

    /// Sets the history the turn's end records (staging it again replaces it).
    pub fn stage_history(&self, history: TurnHistory) {
        self.staged.history(history);
    }

    /// Everything staged so far, leaving the staging area empty.
    pub(super) fn take_end(&self) -> TurnEnd {
        self.staged.take()
    }
}

/// Answers a turn. Errors are retried by the queue with backoff.
#[async_trait]
pub trait TurnHandler: Send + Sync {
    async fn handle(&self, turn: &Turn) -> anyhow::Result<()>;
}
