//! The turn queue: one `jobs` table, written for SQLite and PostgreSQL alike.
//!
//! Invariants:
//! - debounce: a conversation has at most one unclaimed turn (partial unique index); messages
//!   arriving within the debounce window join it, and its start never moves past the cap;
//! - one running turn per conversation, and turns of one conversation run in creation order:
//!   a job is claimable only when no job of its conversation is running or older and pending;
//!   a click waits only for other clicks (its conditional update makes it safe beside a turn),
//!   so a button is answered at once, not after a model turn;
//! - a lease (`locked_by`, `locked_until`, fenced by the attempt number) is renewed by the
//!   holder's heartbeat; completing or failing requires the same lease still held, so a worker
//!   that lost it cannot finish the job; expired leases are reaped back to `retryable`;
//! - a turn's end (its replies, its history and model calls, the job's completion) is one
//!   transaction under that lease: all of it lands or none of it (see [`end`]);
//! - a turn's identity (the job id) and its trigger messages are fixed at first claim and stay
//!   the same on every retry; a click job is created with its one message and trigger;
//! - failures back off exponentially with jitter up to `max_attempts`, then the job is `dead`
//!   with its last error kept; finished jobs are pruned after the retention period.

mod backoff;
mod end;
mod turn;
mod worker;

pub use backoff::Backoff;
pub use end::{TurnEnd, TurnHistory};
pub use turn::{Turn, TurnHandler};
pub use worker::{RunOutcome, Worker, WorkerPool};

use chrono::{DateTime, TimeDelta, Utc};

use crate::config::QueueConfig;
use crate::domain::{ConversationId, JobId, TenantId};

/// Debounce and retry settings applied when a turn is enqueued.
#[derive(Debug, Clone)]
pub struct TurnTiming {
    pub debounce: TimeDelta,
    pub debounce_max: TimeDelta,
    pub max_attempts: u32,
}

impl TurnTiming {
    pub fn from_config(queue: &QueueConfig) -> Self {
        Self {
            debounce: to_delta(queue.debounce),
            debounce_max: to_delta(queue.debounce_max),
            max_attempts: queue.max_attempts,
        }
    }
}

pub(crate) fn to_delta(d: std::time::Duration) -> TimeDelta {
    TimeDelta::from_std(d).unwrap_or(TimeDelta::MAX)
}

/// What a job answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobKind {
    /// The conversation's messages, answered by the agent (debounced).
    Turn,
    /// One click on a pending action's button, answered without the model (never debounced,
    /// never joined by other messages).
    Click,
}

impl JobKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Turn => "turn",
            Self::Click => "click",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "turn" => Self::Turn,
            "click" => Self::Click,
            _ => return None,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobState {
    Available,
    Running,
    Retryable,
    Completed,
    Dead,
}

impl JobState {
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "available" => Self::Available,
            "running" => Self::Running,
            "retryable" => Self::Retryable,
            "completed" => Self::Completed,
            "dead" => Self::Dead,
            _ => return None,
        })
    }
}

/// Proof of holding a job: all three must still match for a heartbeat, completion or failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    pub job: JobId,
    pub worker: String,
    pub attempt: i64,
}

/// A job this worker now holds.
#[derive(Debug, Clone)]
pub struct ClaimedJob {
    pub id: JobId,
    pub kind: JobKind,
    pub tenant: TenantId,
    pub conversation: ConversationId,
    /// 1 on the first claim.
    pub attempt: i64,
    pub max_attempts: i64,
    /// The newest inbound message the turn answers, fixed at first claim.
    pub trigger_message_id: Option<String>,
    pub lease: Lease,
    pub locked_until: DateTime<Utc>,
}

/// A job as stored, for operators and tests.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct JobSnapshot {
    pub id: i64,
    pub tenant_id: i64,
    pub conversation_id: i64,
    pub state: String,
    pub run_at: DateTime<Utc>,
    pub attempts: i64,
    pub max_attempts: i64,
    pub locked_by: Option<String>,
    pub last_error: Option<String>,
    pub trigger_message_id: Option<String>,
}

/// What failing a job did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailOutcome {
    WillRetry,
    Dead,
}
