//! The outbox: every reply is a row with a unique idempotency key, written before anything is
//! sent.
//!
//! Invariants:
//! - the key is derived from what produced the reply (a turn and a sequence number), so a
//!   retried turn that writes the same reply again inserts nothing;
//! - a row is claimed by one sender at a time (`sending`, fenced by its attempt number), and
//!   messages of one conversation go out in order;
//! - the key travels to Meta as `biz_opaque_callback_data`. A send whose response was lost is
//!   `unknown`: a status webhook carrying the key resolves it, and it is sent again only when no
//!   such webhook arrived within the grace period;
//! - status webhooks move a row forward only (sent < delivered < read; failed is terminal);
//! - in local mode (fixed at start), or without an access token, rows are written `local` and
//!   never sent (the simulator shows them); in local mode the sender claims nothing at all;
//! - a turn's replies are written at its end, with its history and the job's completion, only
//!   while the turn's job lease holds (checked in that one transaction), so a worker that lost
//!   its lease cannot send an outdated answer, and a turn that fails sends nothing.
//!
//! The rows themselves (`NewOutbound`, `OutboxKey`, …) are the store's (`crate::store::outbound`);
//! a turn stages its replies through `crate::jobs::Replier`.

mod sender;

pub use sender::{OutboxSender, SendOutcome};
