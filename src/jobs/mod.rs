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
//!
//! The queue's rows (`JobKind`, `Lease`, `ClaimedJob`, …) are the store's (`crate::store::queue`).

mod end;
mod replier;
mod turn;
mod worker;

pub use end::{TurnEnd, TurnHistory};
pub use replier::Replier;
pub use turn::{Turn, TurnHandler};
pub use worker::{RunOutcome, Worker, WorkerPool};
