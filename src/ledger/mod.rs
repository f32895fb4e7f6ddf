//! The idempotent tool executor: every side effect the agent asks for happens at most once,
//! however often the model, the queue or the customer repeats the request.
//!
//! Invariants:
//! - only write tools pass through here; a write's key comes from business identity
//!   ([`key`]), never from the `tool_use_id`;
//! - a key has one row on `agent_tool_executions` (unique per tenant). Every call first reads
//!   it (the probe); what happens when there is none depends on where the tool's effect lands
//!   ([`Reach`]):
//!   - an outside effect reserves the key: `INSERT … ON CONFLICT DO NOTHING RETURNING id`, a
//!     durable commit, and the inserter runs the handler under a lease. The reservation is
//!     durable before any request leaves, which is what lets a later attempt look the effect
//!     up. A reservation that finds the key taken (a concurrent duplicate) writes nothing, and
//!     the call is answered from the winner's row;
//!   - a local effect (rows in our own database) needs no reservation: the handler's own
//!     transaction claims the key, writes the effect and stores the outcome, one commit per
//!     call, and nothing to lease, since a crash leaves neither row nor effect (`ledger::fence`
//!     explains the claim). A handler that wrote nothing (or failed permanently, or was
//!     refused) has its outcome stored by one insert that claims the key the same way; a
//!     claim that finds the key taken is answered from the winner's row, as above;
//! - a replay commits nothing: the probe is a plain indexed read, and the repeat is counted in
//!   memory and written in batches (`store::replays`), so a crash can lose the last second of
//!   replay counts, never a reservation or an outcome. (Until 2026-12-04 a replay counted
//!   itself in the row: an asynchronous commit, but still a row version and a WAL record for
//!   every repeat, and on SQLite a write queued on the single writer);
//! - a reservation is a synchronous commit: an asynchronous one lost in a database crash (or a
//!   failover) while this server keeps running could hand its id out again, and the fence (row
//!   id and generation) would then match another call's row;
//! - a repeat gets the stored outcome (`already_done`, or the permanent failure) without the
//!   handler running again; a call under the same key with different arguments is a
//!   `conflict`, never a silent replay; a call while another attempt holds the lease is
//!   `already_in_progress`;
//! - a lease (`locked_until`) is renewed only by its holder; taking over an expired attempt, a
//!   transient failure or an unknown outcome is one conditional update that bumps
//!   `generation`, and storing an outcome requires the generation it was started with, so a
//!   worker that lost its lease cannot overwrite; duplicates never touch the lease;
//! - an effect undone by a later action (a cancelled booking) is marked `superseded` in the
//!   same transaction as the undoing, so a later request under its key runs again instead of
//!   replaying a success that is no longer true;
//! - the handler receives the key and the attempt (generation, previous state), so it can pass
//!   the key to outside systems and, after an unknown outcome, look the effect up before
//!   creating it again;
//! - the fence cannot reach a provider, so a handler sends an outside request only while its
//!   [`SendWindow`](crate::domain::SendWindow) shows the lease still held, and an attempt that took over a running row is
//!   told until when its predecessor could still send (`crate::domain::SendWindow`'s module
//!   explains both).
//!
//! Where this goes beyond the designs in `reference/idempotency-anchors.md`: typed, versioned
//! normalization (Powertools hashes raw JSON), a fingerprint conflict that explains itself
//! (agent-ledger replays a changed request silently; Stripe only errors), fenced takeover that
//! duplicates cannot starve (agent-ledger's duplicates refresh the lease), transient failures
//! that re-run while permanent ones replay (agent-ledger replays every failure forever;
//! Powertools deletes on any exception), and a first-class `outcome_unknown`.

mod call;
mod decide;
mod executor;
mod fence;
mod key;
pub mod normalize;
mod spec;

pub use call::{Attempt, CallContext, Outcome, Tool, ToolCall, ToolFailure};
pub use executor::Executor;
pub use fence::{Claim, Fence, Held};
pub use key::{KeyScope, MissingTrigger, derive_key, fingerprint};
pub use normalize::{FieldKind, NORMALIZATION_VERSION};
pub use spec::{Effect, FieldSpec, InputError, KeyPolicy, NormalizedArgs, Reach, ToolSpec};

use chrono::{DateTime, Utc};
use sqlx::types::Json;

/// The state of one ledger row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LedgerState {
    Running,
    Succeeded,
    FailedTransient,
    FailedPermanent,
    /// An outside call timed out: the effect may or may not exist.
    OutcomeUnknown,
    /// Refused for a fact about the world at that moment (slot taken, outside hours): nothing
    /// happened and the key is released, so an identical later call is evaluated again.
    Refused,
    /// The effect was undone by a later action (a booking cancelled, a move made again
    /// elsewhere), so replaying it would be false: the next request under this key runs anew.
    Superseded,
}

impl LedgerState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Succeeded => "succeeded",
            Self::FailedTransient => "failed_transient",
            Self::FailedPermanent => "failed_permanent",
            Self::OutcomeUnknown => "outcome_unknown",
            Self::Refused => "refused",
            Self::Superseded => "superseded",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "running" => Self::Running,
            "succeeded" => Self::Succeeded,
            "failed_transient" => Self::FailedTransient,
            "failed_permanent" => Self::FailedPermanent,
            "outcome_unknown" => Self::OutcomeUnknown,
            "refused" => Self::Refused,
            "superseded" => Self::Superseded,
            _ => return None,
        })
    }
}

/// A ledger row as stored.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ExecutionRecord {
    pub id: i64,
    pub idempotency_key: String,
    pub tool: String,
    pub fingerprint: String,
    pub arguments: Json<serde_json::Value>,
    pub status: String,
    pub result: Option<Json<serde_json::Value>>,
    pub error: Option<String>,
    pub generation: i64,
    pub locked_until: Option<DateTime<Utc>>,
    pub replay_count: i64,
    pub tool_use_id: Option<String>,
    /// The turn and its job attempt that reserved (or last took over) the row.
    pub turn_id: Option<i64>,
    pub turn_attempt: Option<i64>,
    pub created_at: DateTime<Utc>,
    /// A token of the attempt that inserted the row (diagnostics; nothing compares it).
    pub reserved_by: String,
    /// When the row was last settled: for `outcome_unknown`, when its attempt gave up on the
    /// outside request (which may still land after that).
    pub completed_at: Option<DateTime<Utc>>,
}

impl ExecutionRecord {
    pub fn state(&self) -> Option<LedgerState> {
        LedgerState::parse(&self.status)
    }
}
