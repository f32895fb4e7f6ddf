//! Verified webhook payloads become deduplicated rows and turn jobs.
//!
//! Invariants:
//! - a provider message id is stored at most once per tenant (unique index,
//!   `INSERT … ON CONFLICT DO NOTHING`), and its turn job is enqueued or extended in the same
//!   transaction, so a duplicate delivery (sequential or concurrent) changes nothing;
//! - one bad element of a batch is logged and counted; its siblings are still processed;
//! - writes are committed in groups across concurrent requests ([`group_commit`]), and a
//!   request is answered only after its writes committed;
//! - no model or provider call happens here: the webhook answers fast.
//!
//! The rows it writes (`IntakeWrite`, `InboundMessage`, …) are the store's
//! (`crate::store::received`).

mod directory;
pub mod group_commit;
mod ingest;

pub use directory::TenantDirectory;
pub use group_commit::GroupCommit;
pub use ingest::{IngestReport, ingest};
