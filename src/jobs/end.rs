//! A turn's end: what the turn leaves behind (its replies, its history and model calls), staged
//! while the handler runs and written by the worker in ONE transaction with the job's
//! completion, fenced by the job lease (`JobStore::finish_turn`).
//!
//! Invariants:
//! - a turn is all-or-nothing at its end: a handler that fails, panics or loses its lease
//!   leaves no reply and no history behind, and its retry stages everything again under the
//!   same keys (`turn:<job>:<seq>` for replies, `(turn, seq)` for history);
//! - nothing staged here is visible to anyone before the end commits, so a handler must not
//!   read back its own replies or history during the turn (none does: replies are keyed by the
//!   turn, and `turn_recorded` is asked before anything is staged);
//! - writes that belong with another fact stay in that fact's own transaction (a pending
//!   action and its buttons, a charge and its message, a ledger effect and its settlement):
//!   they must survive, or not, with the fact, not with the turn;
//! - a turn commits twice of its own when its tools write nothing: the claim and the end (the
//!   intake that created it commits before);
//! - the end's lease check is the completion's own conditional update (the condition of
//!   `hold_job_lease!`), made first: on PostgreSQL it locks the job row for the rest of the
//!   transaction, so the reaper cannot take the turn between the check and the commit, and it
//!   saves the separate check's round trip.
//!
//! Why staging in the `Turn` rather than a transaction held open across the turn: a turn waits
//! on the model for seconds; an open write transaction would hold SQLite's single writer (and
//! on PostgreSQL the job row's lock, blocking the heartbeat) for that long.

use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::domain::{ConversationId, TenantId};
use crate::llm::ChatMessage;
use crate::store::{ModelCall, NewOutbound};

/// What a turn writes when it ends (the turn itself is the job its lease names).
#[derive(Debug, Clone)]
pub struct TurnEnd {
    pub tenant: TenantId,
    pub conversation: ConversationId,
    /// Replies in the order they were staged; each is inserted unless its key exists, and a
    /// reply marked `unless_handed_off` is dropped when a person has the conversation at the
    /// end.
    pub replies: Vec<NewOutbound>,
    /// The model's history of the turn, when the turn went through the model.
    pub history: Option<TurnHistory>,
}

impl TurnEnd {
    /// A turn that ends writing nothing but its completion.
    pub fn empty(tenant: TenantId, conversation: ConversationId) -> Self {
        Self { tenant, conversation, replies: Vec::new(), history: None }
    }
}

/// The turn's messages for the model's history, and the trace of its model calls.
#[derive(Debug, Clone)]
pub struct TurnHistory {
    /// `anthropic` or `openai`.
    pub provider: String,
    pub messages: Vec<ChatMessage>,
    pub calls: Vec<ModelCall>,
}

/// The staging area a [`super::Turn`] carries; shared by its clones (the handoff gate hands a
/// clone to the agent), so whatever any of them stages ends with the turn.
#[derive(Debug)]
pub(super) struct Staged(Mutex<TurnEnd>);

impl Staged {
    pub(super) fn new(tenant: TenantId, conversation: ConversationId) -> Self {
        Self(Mutex::new(TurnEnd::empty(tenant, conversation)))
    }

    fn lock(&self) -> MutexGuard<'_, TurnEnd> {
        // Staging only pushes whole values: a panic elsewhere cannot leave it half-written.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn reply(&self, reply: NewOutbound) {
        self.lock().replies.push(reply);
    }

    pub(super) fn history(&self, history: TurnHistory) {
        self.lock().history = Some(history);
    }

    pub(super) fn take(&self) -> TurnEnd {
        let mut end = self.lock();
        let empty = TurnEnd::empty(end.tenant, end.conversation);
        std::mem::replace(&mut *end, empty)
    }
}
