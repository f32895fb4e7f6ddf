//! The bounds of the numeric settings. A value outside them is legal to parse but would stall,
//! spin or overflow somewhere at run time (a `DateTime + Duration` past chrono's range panics
//! inside a background task), so it is refused at start instead.

use std::ops::RangeInclusive;

/// PostgreSQL allows 100 connections by default; a pool far beyond that fails only later.
pub(super) const DB_MAX_CONNECTIONS: RangeInclusive<u64> = 1..=1_000;
/// Leases are renewed every third of their length: below 3 s that spins; above an hour a
/// crashed worker's turn waits that long before it is retried.
pub(super) const JOB_LEASE_SECONDS: RangeInclusive<u64> = 3..=3_600;
/// A customer waits at least this long for an answer; past an hour it is no longer one.
pub(super) const DEBOUNCE_MS: RangeInclusive<u64> = 0..=3_600_000;
pub(super) const DEBOUNCE_MAX_MS: RangeInclusive<u64> = 0..=3_600_000;
/// Webhook writes committed together: 1 commits each on its own (no group commit); a batch
/// holds its writers' row locks until it commits, so a thousand is plenty.
pub(super) const INTAKE_BATCH_MAX: RangeInclusive<u64> = 1..=1_000;
/// How long a batch waits for company after its first write; every write in it waits up to
/// this long, so beyond 100 ms it is a delay, not a batch.
pub(super) const INTAKE_BATCH_WINDOW_MS: RangeInclusive<u64> = 0..=100;
/// Batches committing at once (PostgreSQL; SQLite has one writer). Each holds a connection.
pub(super) const INTAKE_WRITERS: RangeInclusive<u64> = 1..=32;
/// Each worker may hold a database connection for a whole turn.
pub(super) const WORKERS: RangeInclusive<u64> = 1..=256;
/// Every retry backs off exponentially, so more attempts than this would span weeks.
pub(super) const MAX_ATTEMPTS: RangeInclusive<u64> = 1..=100;
/// The first retry delay: up to an hour.
pub(super) const BACKOFF_BASE_MS: RangeInclusive<u64> = 1..=3_600_000;
/// The longest retry delay: a day, after which a reply is no longer worth sending.
pub(super) const BACKOFF_MAX_SECONDS: RangeInclusive<u64> = 1..=86_400;
/// Finished jobs are kept up to a year.
pub(super) const JOB_RETENTION_HOURS: RangeInclusive<u64> = 1..=8_760;
/// Idle workers and the sender look for work this often; zero would spin, and more than a
/// minute delays work that arrived without a wake-up (from another process).
pub(super) const POLL_INTERVAL_MS: RangeInclusive<u64> = 1..=60_000;
/// A send with a lost response waits this long for a status webhook: up to a day.
pub(super) const OUTBOX_GRACE_SECONDS: RangeInclusive<u64> = 1..=86_400;
pub(super) const OUTBOX_SENDERS: RangeInclusive<u64> = 1..=64;
/// One call to the Graph API; Meta answers in seconds, five minutes is a hung connection.
pub(super) const HTTP_TIMEOUT_SECONDS: RangeInclusive<u64> = 1..=300;
/// Renewed every third of its length like the job lease; never shorter than it (see below).
pub(super) const LEDGER_LEASE_SECONDS: RangeInclusive<u64> = 3..=7_200;
/// Settled ledger rows are kept up to ten years.
pub(super) const LEDGER_RETENTION_DAYS: RangeInclusive<u64> = 1..=3_650;
/// Model calls per turn; each is a paid round trip the customer waits for.
pub(super) const AGENT_MAX_STEPS: RangeInclusive<u64> = 1..=50;
/// No current model answers with more tokens than this in one response.
pub(super) const AGENT_MAX_TOKENS: RangeInclusive<u64> = 1..=200_000;
pub(super) const AGENT_HISTORY_TURNS: RangeInclusive<u64> = 1..=1_000;
/// A few megabytes of history already exceeds every model's context window.
pub(super) const AGENT_HISTORY_BUDGET_CHARS: RangeInclusive<u64> = 1..=4_000_000;
/// One model call, retries included; past ten minutes the customer has given up.
pub(super) const LLM_TIMEOUT_SECONDS: RangeInclusive<u64> = 1..=600;
/// A human handoff ends after this long without messages: at least a few minutes (a person
/// types slowly), at most a day.
pub(super) const HANDOFF_IDLE_MINUTES: RangeInclusive<u64> = 5..=1_440;
/// In-flight turns get this long on shutdown; supervisors kill a process long before an hour.
pub(super) const SHUTDOWN_GRACE_SECONDS: RangeInclusive<u64> = 1..=3_600;
