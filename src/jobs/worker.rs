//! The worker: claim a turn, run its handler while renewing the lease, settle the job.
//!
//! A handler that returns Ok ends the turn in one transaction ([`JobStore::finish_turn`]): the
//! replies and history it staged land with the job's completion, or, when the lease was lost,
//! none of them does. A handler that fails leaves nothing staged behind.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use chrono::{DateTime, TimeDelta, Utc};
use tokio::sync::Notify;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::end::Staged;
use super::{Turn, TurnEnd, TurnHandler};
use crate::config::QueueConfig;
use crate::domain::{Backoff, JobId, to_delta};
use crate::metrics::Metrics;
use crate::store::{ClaimedJob, FailOutcome, InboundStore, JobState, JobStore, LedgerStore, Store, TenantStore};
use crate::supervise::{RESTART_DELAY, supervise};

/// How often a pool runs maintenance (reap expired leases, prune finished jobs) at most.
const MAINTENANCE_MAX_INTERVAL: Duration = Duration::from_secs(30);

/// Wall time shifted to start at a chosen instant, so tests can run a step "later" without
/// sleeping while leases still age as they really do.
#[derive(Clone, Copy)]
struct Clock {
    origin: DateTime<Utc>,
    started: Instant,
}

impl Clock {
    fn starting_at(origin: DateTime<Utc>) -> Self {
        Self { origin, started: Instant::now() }
    }
    fn now(&self) -> DateTime<Utc> {
        self.origin + to_delta(self.started.elapsed())
    }
}

/// What one `run_next` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunOutcome {
    Empty,
    Completed(JobId),
    WillRetry(JobId),
    Dead(JobId),
    /// The lease was lost while running (expired and reaped, or taken over): nothing recorded.
    LeaseLost(JobId),
}

#[derive(Clone)]
pub struct Worker {
    id: String,
    store: Store,
    handler: Arc<dyn TurnHandler>,
    config: QueueConfig,
    metrics: Metrics,
    /// Settled ledger rows older than this are pruned by `maintain`.
    ledger_retention: Option<Duration>,
    /// Woken when a turn's end queued a reply to send (the outbox sender's).
    outbox_wake: Option<Arc<Notify>>,
}

enum Ran {
    Finished(anyhow::Result<TurnEnd>),
    LeaseLost,
}

impl Worker {
    pub fn new(id: String, store: Store, handler: Arc<dyn TurnHandler>, config: QueueConfig, metrics: Metrics) -> Self {
        Self { id, store, handler, config, metrics, ledger_retention: None, outbox_wake: None }
    }

    /// Wakes the outbox sender through `wake` when a turn's end queued a reply to send.
    /// Without it, the sender finds the rows when it next polls.
    pub fn with_outbox_wake(mut self, wake: Arc<Notify>) -> Self {
        self.outbox_wake = Some(wake);
        self
    }

    /// Also prune the tool ledger during maintenance.
    pub fn with_ledger_retention(mut self, retention: Duration) -> Self {
        self.ledger_retention = Some(retention);
        self
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    /// Claims one due turn and runs it to an outcome. Tests call this directly.
    pub async fn run_next(&self) -> anyhow::Result<RunOutcome> {
        self.run_next_at(Utc::now()).await
    }

    /// `run_next` as if the clock read `now` (time moves on from there as it really does).
    /// The claim, the turn and its end are one unit of work: one connection on PostgreSQL.
    pub async fn run_next_at(&self, now: DateTime<Utc>) -> anyhow::Result<RunOutcome> {
        self.store.unit(self.claim_and_run(now)).await
    }

    async fn claim_and_run(&self, now: DateTime<Utc>) -> anyhow::Result<RunOutcome> {
        let now = self.store.db_time(now);
        let clock = Clock::starting_at(now);
        let Some(job) = self
            .store
            .claim_next(&self.id, now, now + to_delta(self.config.lease))
            .await
            .context("failed to claim a job")?
        else {
            return Ok(RunOutcome::Empty);
        };
        self.metrics.jobs_claimed.inc();
        let span = tracing::info_span!(
            "turn",
            job = %job.id, tenant = %job.tenant, conversation = %job.conversation, attempt = job.attempt
        );
        let started = Instant::now();
        let outcome = self.run_claimed(job, clock).instrument(span).await;
        self.metrics.turn_seconds.observe(started.elapsed().as_secs_f64());
        outcome
    }

    async fn run_claimed(&self, job: ClaimedJob, clock: Clock) -> anyhow::Result<RunOutcome> {
        let ran = tokio::select! {
            result = self.handle(&job) => Ran::Finished(result),
            () = self.keep_lease(&job, clock) => Ran::LeaseLost,
        };
        let now = clock.now();
        match ran {
            Ran::LeaseLost => {}
            Ran::Finished(result) => {
                let failure = match result {
                    Ok(end) => {
                        let written_at = self.store.db_time(Utc::now());
                        match self.store.finish_turn(&job.lease, &end, now, written_at).await {
                            Ok(Some(finished)) => {
                                if finished.to_send > 0
                                    && let Some(wake) = &self.outbox_wake
                                {
                                    wake.notify_one();
                                }
                                self.metrics.jobs_completed.inc();
                                tracing::info!("turn completed");
                                return Ok(RunOutcome::Completed(job.id));
                            }
                            Ok(None) => None,
                            // Nothing of the end was written: the turn is retried with backoff,
                            // like a failure of the handler, not left to its lease.
                            Err(e) => Some(anyhow::Error::from(e).context("failed to record the turn's end")),
                        }
                    }
                    Err(error) => Some(error),
                };
                if let Some(error) = failure {
                    let error = format!("{error:#}");
                    let backoff = Backoff { base: self.config.backoff_base, max: self.config.backoff_max };
                    let retry_at = now + to_delta(backoff.delay(job.attempt as u32));
                    match self.store.fail(&job.lease, &error, false, retry_at, now).await? {
                        Some(FailOutcome::WillRetry) => {
                            self.metrics.jobs_retried.inc();
                            tracing::warn!(%error, %retry_at, "turn failed, will retry");
                            return Ok(RunOutcome::WillRetry(job.id));
                        }
                        Some(FailOutcome::Dead) => {
                            self.metrics.jobs_dead.inc();
                            tracing::error!(%error, "turn failed for the last time");
                            return Ok(RunOutcome::Dead(job.id));
                        }
                        None => {}
                    }
                }
            }
        }
        self.metrics.jobs_lease_lost.inc();
        tracing::warn!("lease lost; another worker owns this turn now");
        Ok(RunOutcome::LeaseLost(job.id))
    }

    /// Runs the handler; on success, what the turn staged for its end.
    async fn handle(&self, job: &ClaimedJob) -> anyhow::Result<TurnEnd> {
        let tenant = self.store.tenant(job.tenant).await?.context("the turn's tenant no longer exists")?;
        let contact = self.store.conversation_contact(job.tenant, job.conversation).await?;
        let messages = self.store.turn_messages(job.tenant, job.id).await?;
        if messages.is_empty() {
            // Nothing new to answer (its messages were taken by an earlier turn).
            return Ok(TurnEnd::empty(job.tenant, job.conversation));
        }
        let turn = Turn {
            id: job.id,
            kind: job.kind,
            tenant,
            conversation: job.conversation,
            contact,
            messages,
            trigger_message_id: job.trigger_message_id.clone(),
            lease: job.lease.clone(),
            last_attempt: job.attempt >= job.max_attempts,
            yields_to_person: false,
            staged: Arc::new(Staged::new(job.tenant, job.conversation)),
        };
        self.handler.handle(&turn).await?;
        Ok(turn.take_end())
    }

    /// Renews the lease every third of its length; returns when it was lost, or when renewals
    /// kept failing until the lease held could run out before the next beat (stopping the turn
    /// then, before another worker may take it).
    async fn keep_lease(&self, job: &ClaimedJob, clock: Clock) {
        let every = self.config.lease / 3;
        let mut held_until = job.locked_until;
        loop {
            tokio::time::sleep(every).await;
            let now = clock.now();
            let until = now + to_delta(self.config.lease);
            match self.store.heartbeat(&job.lease, now, until).await {
                Ok(true) => held_until = until,
                Ok(false) => return,
                // A failed renewal is not a lost lease yet; the next beat may succeed.
                Err(e) if now + to_delta(every) < held_until => tracing::warn!(error = %e, "lease renewal failed"),
                Err(e) => {
                    tracing::error!(error = %e, "lease could not be renewed before it ran out; stopping the turn");
                    return;
                }
            }
        }
    }

    /// Reaps expired leases and prunes old finished jobs.
    pub async fn maintain(&self) -> anyhow::Result<()> {
        self.maintain_at(Utc::now()).await
    }

    pub async fn maintain_at(&self, now: DateTime<Utc>) -> anyhow::Result<()> {
        let now = self.store.db_time(now);
        for (job, state) in self.store.reap_expired(now).await? {
            match state {
                JobState::Dead => {
                    self.metrics.jobs_dead.inc();
                }
                _ => {
                    self.metrics.jobs_retried.inc();
                }
            }
            tracing::warn!(%job, ?state, "reclaimed a turn whose worker stopped renewing its lease");
        }
        let pruned = self.store.prune_finished(now - to_delta(self.config.retention)).await?;
        if pruned > 0 {
            tracing::info!(pruned, "pruned finished jobs");
        }
        if let Some(retention) = self.ledger_retention {
            // Never shorter than a booking can lie ahead: a repeat of a booking request must be
            // recognized for as long as the booking can exist.
            let horizon = TimeDelta::days(self.store.max_horizon_days().await?);
            let pruned = self.store.prune_executions(now - to_delta(retention).max(horizon)).await?;
            if pruned > 0 {
                tracing::info!(pruned, "pruned settled ledger rows");
            }
        }
        Ok(())
    }

    /// Maintenance every half lease (at most every `MAINTENANCE_MAX_INTERVAL`) until `stop`.
    async fn maintain_until(self, stop: CancellationToken) {
        let every = (self.config.lease / 2).min(MAINTENANCE_MAX_INTERVAL);
        while !stop.is_cancelled() {
            if let Err(e) = self.maintain().await {
                tracing::error!(error = format!("{e:#}"), "queue maintenance failed");
            }
            tokio::select! {
                () = tokio::time::sleep(every) => {}
                () = stop.cancelled() => {}
            }
        }
    }

    async fn run(self, wake: Arc<Notify>, shutdown: CancellationToken) {
        while !shutdown.is_cancelled() {
            match self.run_next().await {
                Ok(RunOutcome::Empty) => {}
                Ok(_) => continue,
                Err(e) => tracing::error!(error = format!("{e:#}"), "worker step failed"),
            }
            tokio::select! {
                () = wake.notified() => {}
                () = tokio::time::sleep(self.config.poll_interval) => {}
                () = shutdown.cancelled() => {}
            }
        }
    }
}

/// N workers and a maintenance task, stopped together; each is supervised (restarted when it
/// panics or returns before shutdown).
pub struct WorkerPool {
    tasks: JoinSet<()>,
    shutdown: CancellationToken,
}

impl WorkerPool {
    pub fn start(template: &Worker, wake: Arc<Notify>, shutdown: CancellationToken) -> Self {
        let mut pool = Self { tasks: JoinSet::new(), shutdown: shutdown.clone() };
        for i in 0..template.config.workers {
            let mut worker = template.clone();
            worker.id = format!("{}-{i}", template.id);
            let (wake, stop) = (wake.clone(), shutdown.clone());
            pool.spawn(format!("worker-{i}"), move || worker.clone().run(wake.clone(), stop.clone()));
        }
        let maintainer = template.clone();
        pool.spawn("queue-maintenance".to_owned(), move || maintainer.clone().maintain_until(shutdown.clone()));
        pool
    }

    /// Adds a supervised task that stops with the pool (the outbox sender); `start` builds a
    /// fresh instance for every (re)start.
    pub fn spawn<F, Fut>(&mut self, name: String, start: F)
    where
        F: FnMut() -> Fut + Send + 'static,
        Fut: std::future::Future<Output = ()> + Send + 'static,
    {
        let shutdown = self.shutdown.clone();
        self.tasks.spawn(async move { supervise(&name, RESTART_DELAY, shutdown, start).await });
    }

    /// Stops claiming and waits for in-flight turns up to `deadline`; turns still running
    /// then are aborted and retried by another worker once their lease expires.
    pub async fn stop(mut self, deadline: Duration) {
        self.shutdown.cancel();
        let drained = tokio::time::timeout(deadline, async { while self.tasks.join_next().await.is_some() {} }).await;
        if drained.is_err() {
            tracing::warn!("shutdown deadline reached; aborting in-flight turns");
            self.tasks.shutdown().await;
        }
    }
}
