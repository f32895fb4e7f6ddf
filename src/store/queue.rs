//! The turn queue's rows: what a job answers, its state, the lease that fences it, a job just
//! claimed, a job as stored, what failing one did, and the timing a turn is enqueued with. See
//! `crate::jobs` for the invariants.

use chrono::{DateTime, TimeDelta, Utc};

use crate::config::QueueConfig;
use crate::domain::{ConversationId, JobId, TenantId, to_delta};

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
