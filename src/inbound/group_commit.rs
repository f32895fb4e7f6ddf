//! Group commit at the intake: concurrent webhook requests hand their verified, parsed writes
//! to writer tasks that store them in one transaction per batch, and each request is answered
//! after the commit that holds its writes.
//!
//! Why: a durable commit waits for the disk's flush, and one commit per message made that flush
//! the ceiling of the intake. The limit is the flush rate times the writes that share a flush.
//!
//! Invariants:
//! - a write is answered only after the transaction holding it committed, or with the error that
//!   kept it out: a 200 still means "stored durably";
//! - batching changes when a commit happens, never what is written (`IntakeStore`): dedup stays
//!   the unique provider id (a repeat inside a batch, in another writer's batch or another
//!   process's is one row) and a message's turn upsert stays in the transaction that stores it;
//! - one failing write never fails its batch-mates: when a batch's transaction fails, each of
//!   its writes is retried alone, in a transaction of its own, and answered with its own result;
//! - a batch closes when it holds `batch_max` writes or `batch_window` after its first write;
//!   a writer never waits while it has nothing, and while one batch commits the next collects,
//!   so batches grow with the load by themselves;
//! - writes of one sender keep their arrival order (message ids follow it): a sender's writes
//!   always go to the same writer (routed by the sender's key, known before the conversation,
//!   which a first message creates in its batch), which commits one batch after the other (a
//!   failed batch's writes are retried alone, in order, before the next batch); in a batch,
//!   clicks and statuses are written after its customer messages;
//! - batches take row locks in sender order, so two batches rarely wait on each other in a
//!   cycle (a deadlock the database breaks is one more failed batch, retried alone);
//! - SQLite has one writing connection, so one writer; PostgreSQL runs `writers` writers, each
//!   committing on its own connection, and every process batches on its own.

use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use crate::config::IntakeConfig;
use crate::metrics::Metrics;
use crate::store::{IntakeStore, IntakeWrite, Store, StoreError, StoreResult, TurnTiming, Written};

/// Batches' worth of writes a writer's queue holds: enough to fill its next batches while the
/// current one commits; beyond it, requests wait to enqueue (backpressure).
const QUEUED_BATCHES_PER_WRITER: usize = 4;

/// Stores intake writes, alone or in batches. Cheap to clone.
#[derive(Clone)]
pub struct GroupCommit {
    store: Store,
    timing: Arc<TurnTiming>,
    metrics: Metrics,
    /// One queue per writer; empty when group commit is off (`batch_max` 1), each write then
    /// commits in its request's task.
    queues: Vec<mpsc::Sender<Queued>>,
}

struct Queued {
    write: IntakeWrite,
    answer: oneshot::Sender<StoreResult<Written>>,
}

/// One writer task: collects a batch from its queue, commits it, and again.
struct Writer {
    store: Store,
    timing: Arc<TurnTiming>,
    metrics: Metrics,
    batch_max: usize,
    window: Duration,
    queue: mpsc::Receiver<Queued>,
}

impl GroupCommit {
    /// Starts the writers (none when `batch_max` is 1). They stop once every clone of the
    /// returned handle is dropped and the writes already handed over are answered.
    pub fn start(store: Store, timing: Arc<TurnTiming>, metrics: Metrics, config: &IntakeConfig) -> Self {
        if config.batch_max <= 1 {
            return Self { store, timing, metrics, queues: Vec::new() };
        }
        let writers = if store.backend() == "sqlite" { 1 } else { config.writers.max(1) };
        let queues = (0..writers)
            .map(|_| {
                let (sender, queue) = mpsc::channel(config.batch_max * QUEUED_BATCHES_PER_WRITER);
                let writer = Writer {
                    store: store.clone(),
                    timing: timing.clone(),
                    metrics: metrics.clone(),
                    batch_max: config.batch_max,
                    window: config.batch_window,
                    queue,
                };
                tokio::spawn(writer.run());
                sender
            })
            .collect();
        Self { store, timing, metrics, queues }
    }

    /// Stores a webhook body's writes in order; returns once they are committed (or could not
    /// be), each with its own result. Queued together, they usually share one batch.
    pub async fn write_all(&self, writes: Vec<IntakeWrite>) -> Vec<StoreResult<Written>> {
        if self.queues.is_empty() {
            // Alone, one after another: a conversation's messages keep their order.
            let mut results = Vec::with_capacity(writes.len());
            for write in writes {
                results.push(self.write(write).await);
            }
            return results;
        }
        // Enqueued one after another, so they enter their writers' queues in arrival order even
        // when a queue is full and some wait for room; then answered together.
        let mut answers = Vec::with_capacity(writes.len());
        for write in writes {
            answers.push(self.enqueue(write).await);
        }
        let mut results = Vec::with_capacity(answers.len());
        for answer in answers {
            results.push(match answer {
                Ok(answered) => answered.await.map_err(|_| stopped()).and_then(|r| r),
                Err(e) => Err(e),
            });
        }
        results
    }

    /// Stores `write`; returns once it is committed (or could not be).
    pub async fn write(&self, write: IntakeWrite) -> StoreResult<Written> {
        if self.queues.is_empty() {
            self.metrics.intake_batch_size.observe(1.0);
            return self.store.write_intake(&write, &self.timing, Utc::now()).await;
        }
        self.enqueue(write).await?.await.map_err(|_| stopped())?
    }

    /// Puts `write` in its writer's queue (waiting for room); the receiver gets its result.
    async fn enqueue(&self, write: IntakeWrite) -> StoreResult<oneshot::Receiver<StoreResult<Written>>> {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        lock_order(&write).hash(&mut hasher);
        let queue = &self.queues[(hasher.finish() % self.queues.len() as u64) as usize];
        let (answer, answered) = oneshot::channel();
        queue.send(Queued { write, answer }).await.map_err(|_| stopped())?;
        Ok(answered)
    }
}

fn stopped() -> StoreError {
    StoreError::Database(sqlx::Error::PoolClosed)
}

impl Writer {
    async fn run(mut self) {
        while let Some(mut batch) = self.collect().await {
            // Stable: a conversation's writes keep their arrival order.
            batch.sort_by_key(|q| lock_order(&q.write));
            self.commit(batch).await;
        }
    }

    /// The next batch: waits for a first write, then takes what is queued, waiting up to the
    /// window for more while the batch has room. `None` once the queue is closed and empty.
    async fn collect(&mut self) -> Option<Vec<Queued>> {
        let queue = &mut self.queue;
        let first = queue.recv().await?;
        let mut batch = Vec::with_capacity(self.batch_max);
        batch.push(first);
        let deadline = Instant::now() + self.window;
        while batch.len() < self.batch_max {
            match queue.try_recv() {
                Ok(next) => batch.push(next),
                Err(mpsc::error::TryRecvError::Disconnected) => break,
                Err(mpsc::error::TryRecvError::Empty) => match tokio::time::timeout_at(deadline, queue.recv()).await {
                    Ok(Some(next)) => batch.push(next),
                    Ok(None) | Err(_) => break,
                },
            }
        }
        Some(batch)
    }

    async fn commit(&self, batch: Vec<Queued>) {
        self.metrics.intake_batch_size.observe(batch.len() as f64);
        let writes: Vec<&IntakeWrite> = batch.iter().map(|q| &q.write).collect();
        match self.store.write_intake_batch(&writes, &self.timing, Utc::now()).await {
            Ok(written) => {
                for (queued, written) in batch.into_iter().zip(written) {
                    // The request may have gone (client hung up); its write is stored anyway.
                    let _ = queued.answer.send(Ok(written));
                }
            }
            Err(e) if batch.len() == 1 => {
                if let Some(queued) = batch.into_iter().next() {
                    let _ = queued.answer.send(Err(e));
                }
            }
            Err(e) => {
                self.metrics.intake_batches_split.inc();
                tracing::warn!(error = %e, writes = batch.len(), "an intake batch failed; retrying its writes alone");
                for queued in batch {
                    let result = self.store.write_intake(&queued.write, &self.timing, Utc::now()).await;
                    let _ = queued.answer.send(result);
                }
            }
        }
    }
}

/// Where a write goes and in which order a batch takes its locks: its tenant, then its sender's
/// key, statuses after every sender. A message is routed before its conversation is known (a
/// first contact's is created in the batch), so the key is the sender's, not the conversation's.
fn lock_order(write: &IntakeWrite) -> (i64, LockKey) {
    match write {
        IntakeWrite::Message { tenant, message, .. } => {
            // Every stored message has a key (the read before it refused one without).
            (tenant.0, LockKey::Sender(message.contact.external_key().unwrap_or_default()))
        }
        IntakeWrite::Status { tenant, .. } => (tenant.0, LockKey::Statuses),
    }
}

/// Senders in key order, then statuses (which lock outbound rows only).
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum LockKey {
    Sender(String),
    Statuses,
}
