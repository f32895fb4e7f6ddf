//! What a tool call is: who asks and in which turn ([`CallContext`]), the attempt that holds its
//! row ([`Attempt`]), the call a tool runs ([`ToolCall`]), how a tool fails ([`ToolFailure`]),
//! and what the model is told ([`Outcome`]).

use std::time::Instant;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::LedgerState;
use super::fence::Fence;
use super::spec::{InputError, NormalizedArgs, ToolSpec};
use crate::domain::{ContactId, ConversationId, JobId, LedgerKey, SendWindow};
use crate::tenant::Tenant;

/// Who is asking, in which conversation and turn.
#[derive(Debug, Clone)]
pub struct CallContext<'a> {
    pub tenant: &'a Tenant,
    pub customer: ContactId,
    pub conversation: ConversationId,
    pub turn: Option<JobId>,
    /// The job attempt of `turn` making the call: a later attempt of the same turn takes over
    /// a row an earlier one left running (that attempt lost the job's lease, so it is gone).
    pub turn_attempt: Option<i64>,
    /// The provider id of the turn's newest inbound message (per-turn keys).
    pub trigger_message_id: Option<&'a str>,
    /// Kept for tracing only; never part of a key.
    pub tool_use_id: Option<&'a str>,
    /// The current time, read when the call is made: leases are measured from it (tests
    /// inject it to move the clock).
    pub now: DateTime<Utc>,
}

impl<'a> CallContext<'a> {
    /// A call made outside any turn (the console, a sweep): no job, no trigger message, no
    /// `tool_use_id` until the caller sets one.
    pub fn outside_turn(
        tenant: &'a Tenant,
        customer: ContactId,
        conversation: ConversationId,
        now: DateTime<Utc>,
    ) -> Self {
        Self {
            tenant,
            customer,
            conversation,
            turn: None,
            turn_attempt: None,
            trigger_message_id: None,
            tool_use_id: None,
            now,
        }
    }
}

/// Which attempt at a key a handler is running.
#[derive(Debug, Clone, Copy)]
pub struct Attempt<'a> {
    /// What the transaction of a local effect proves before writing it.
    pub fence: Fence<'a>,
    /// The state the row was taken over from: `OutcomeUnknown` (or `Running`, an attempt that
    /// died) tells the handler to look the effect up before creating it. `None` for a fresh
    /// reservation or claim.
    pub previous: Option<LedgerState>,
    /// Taken over from a row left running or with an unknown outcome: until when its holder
    /// may still have sent an outside request (see `domain::window`). A handler calling a
    /// provider that does not deduplicate waits this out, plus the time such a request may take
    /// to land, before it trusts a lookup that finds nothing.
    pub predecessor_sends_until: Option<Instant>,
}

/// What a handler gets.
#[derive(Debug, Clone)]
pub struct ToolCall<'a> {
    pub ctx: &'a CallContext<'a>,
    pub args: &'a NormalizedArgs,
    /// For writes: the ledger key, to pass on to outside systems.
    pub key: Option<&'a LedgerKey>,
    pub attempt: Option<Attempt<'a>>,
    /// While it is open, the attempt still holds its lease: requests with an outside effect
    /// are sent only then. Always open for reads.
    pub window: SendWindow,
}

/// How a handler failed.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolFailure {
    /// A fact about the request (bad input, unknown service, booking not found): repeating it
    /// cannot succeed. Stored and replayed.
    Permanent { message: String, details: Value },
    /// A fact about the world right now (slot taken, outside hours, beyond the horizon, time
    /// off): nothing happened and the key is released, so an identical later call is
    /// evaluated again when the world may have changed.
    Refused { message: String, details: Value },
    /// Nothing happened; the next attempt runs the handler again.
    Transient(String),
    /// An outside call timed out after it may have taken effect.
    Unknown(String),
}

impl ToolFailure {
    /// A storage failure is transient: nothing was decided, the next attempt may succeed.
    pub fn storage(e: impl std::fmt::Display) -> Self {
        Self::Transient(format!("storage error: {e}"))
    }

    pub fn permanent(message: impl Into<String>, details: Value) -> Self {
        Self::Permanent { message: message.into(), details }
    }

    pub fn refused(message: impl Into<String>, details: Value) -> Self {
        Self::Refused { message: message.into(), details }
    }
}

#[async_trait]
pub trait Tool: Send + Sync {
    fn spec(&self) -> &'static ToolSpec;
    async fn run(&self, call: &ToolCall<'_>) -> Result<Value, ToolFailure>;
}

/// What the agent is told.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Executed(Value),
    AlreadyDone(Value),
    AlreadyInProgress,
    Conflict {
        existing: Value,
        existing_result: Option<Value>,
        hint: &'static str,
    },
    Failed {
        error: String,
        details: Value,
    },
    Retryable {
        error: String,
    },
    /// The input was refused before anything ran.
    Invalid(InputError),
}

impl Outcome {
    /// JSON the model can act on.
    pub fn to_model_json(&self) -> Value {
        match self {
            Self::Executed(result) => result.clone(),
            Self::AlreadyDone(result) => {
                let mut v = object(result);
                v["already_done"] = json!(true);
                v["note"] =
                    json!("This was already done earlier with the same details. Report it as done; do not call again.");
                v
            }
            Self::AlreadyInProgress => json!({
                "already_in_progress": true,
                "note": "The same request is being carried out right now. Do not call this tool again; tell the customer it is being processed.",
            }),
            Self::Conflict { existing, existing_result, hint } => json!({
                "conflict": true,
                "error": "A request for the same thing already exists with different details.",
                "existing_request": existing,
                "existing_result": existing_result,
                "what_to_do": hint,
            }),
            Self::Failed { error, details } => json!({ "error": error, "details": details, "retryable": false }),
            Self::Retryable { error } => json!({
                "error": error,
                "retryable": true,
                "note": "Nothing was done. You may call again with the same arguments.",
            }),
            Self::Invalid(e) => json!({ "error": format!("invalid input: {e}"), "retryable": false }),
        }
    }

    /// The outcome's kind, a bounded metrics label.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Executed(_) => "executed",
            Self::AlreadyDone(_) => "already_done",
            Self::AlreadyInProgress => "in_progress",
            Self::Conflict { .. } => "conflict",
            Self::Failed { .. } => "failed",
            Self::Retryable { .. } => "retryable",
            Self::Invalid(_) => "invalid",
        }
    }

    pub fn is_error(&self) -> bool {
        matches!(self, Self::Conflict { .. } | Self::Failed { .. } | Self::Retryable { .. } | Self::Invalid(_))
    }
}

fn object(v: &Value) -> Value {
    if v.is_object() { v.clone() } else { json!({ "result": v }) }
}
