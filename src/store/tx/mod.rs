//! Transaction fragments several store files compose: each is a macro over an open write
//! transaction (`$tx`), so one commit can hold a fact and everything that must land with it.
//!
//! How they compose, inside one `writing!` transaction:
//! - a turn's write first holds the job lease ([`hold_job_lease`]); everything after it is fenced
//!   by it (on PostgreSQL the job row stays locked until the commit, so the reaper waits);
//! - a ledger effect first holds its fence ([`hold_fence`], which inserts the row for a claim
//!   through [`insert_new_execution`]), writes the effect, supersedes rows about what changed
//!   ([`supersede_subject`]) and settles ([`settle_in_tx`]): effect and outcome commit together;
//! - a message that announces a fact is inserted with it ([`insert_outbound`]), dropped when a
//!   person has the conversation ([`handed_off`]);
//! - an appointment's write is a whole transaction of its own ([`fenced_write`]: fence, queue
//!   behind the customer's and the professional's day locks ([`slot_locks`]), write, settle,
//!   commit), the overlap the database refuses told as a taken slot;
//! - an inbound message is admitted to its conversation ([`admit_in_tx`]: known, upserted, or
//!   dropped for an erasure that raced it) and recorded with its job ([`record_in_tx`]).
//!
//! Each returns a `Result` the caller `?`s; none but `fenced_write` commits or rolls back: the
//! caller's transaction decides.

mod booking;
pub(crate) mod conversation;
mod history;
mod lease;
mod ledger;
mod outbound;

pub(crate) use booking::{
    DEADLOCK_RETRIES, Keyed, database_failure, fenced_write, is_deadlock, is_overlap, overlap_or, release_active,
    slot_locks, subject,
};
pub(crate) use conversation::{
    admit_in_tx, bind_inbound, conversation_in_tx, insert_inbound_sql, record_in_tx, upsert_contact_in_tx,
    upsert_turn_sql,
};
pub(crate) use history::insert_history;
pub(crate) use lease::hold_job_lease;
pub(crate) use ledger::{hold_fence, insert_new_execution, settle_in_tx, supersede_subject};
pub(crate) use outbound::{apply_status_on, handed_off, insert_outbound};
