//! The statements idle workers run on every poll: is anything due? Each answers from its queue's
//! partial index (`jobs_due`, `outbound_messages_due`, `payment_events_due`) and reads nothing
//! else, whatever the tables hold (the outbox keeps every message ever sent).
//!
//! Each one orders by the index's column. Without the `ORDER BY`, PostgreSQL's generic plan
//! (which a pooled connection keeps once it is chosen, and chooses from the statistics of the
//! moment, or from none) may prefer a sequential scan that stops at the first due row: when no
//! row is due, the poll then reads the whole table, once per idle worker and interval. The
//! intake bench found it: with 5,000 debounced turns, idle workers' polls were PostgreSQL's
//! busiest statement. With the order, the index is the cheapest plan for every parameter.

/// `$1`: now. A row when a job is due.
pub const JOB_DUE: &str =
    "SELECT 1 FROM jobs WHERE state IN ('available', 'retryable') AND run_at <= $1 ORDER BY run_at LIMIT 1";

/// `$1`: now. A row when a message is due to be sent (or looked at again).
pub const OUTBOUND_DUE: &str = "SELECT 1 FROM outbound_messages
     WHERE status IN ('pending', 'sending', 'unknown') AND next_attempt_at <= $1
     ORDER BY next_attempt_at LIMIT 1";

/// `$1`: now. The id of a payment notification due to be processed.
pub const PAYMENT_EVENT_DUE: &str = "SELECT id FROM payment_events
     WHERE status = 'received' AND next_attempt_at <= $1
     ORDER BY next_attempt_at LIMIT 1";

/// A queue an idle worker polls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Queue {
    Jobs,
    Outbound,
    PaymentEvents,
}

impl Queue {
    fn due_sql(self) -> &'static str {
        match self {
            Self::Jobs => JOB_DUE,
            Self::Outbound => OUTBOUND_DUE,
            Self::PaymentEvents => PAYMENT_EVENT_DUE,
        }
    }
}

impl super::Store {
    /// Whether anything in `queue` is due at `now`: a read, so idle pollers stay off SQLite's
    /// single writer and take no lock anywhere.
    pub(crate) async fn is_due(&self, queue: Queue, now: chrono::DateTime<chrono::Utc>) -> super::StoreResult<bool> {
        Ok(super::reading!(self, pool => {
            sqlx::query(queue.due_sql()).bind(now).fetch_optional(pool).await.map(|row| row.is_some())
        })?)
    }
}

/// Every poll, by the queue it watches (for the test that checks their plans).
pub const ALL: [(&str, &str); 3] =
    [("jobs", JOB_DUE), ("outbound_messages", OUTBOUND_DUE), ("payment_events", PAYMENT_EVENT_DUE)];
