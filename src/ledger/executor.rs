//! Runs tools: reads directly, writes through the ledger.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::call::{Attempt, CallContext, Outcome, Tool, ToolCall, ToolFailure};
use super::decide::{Decision, decide, settlement_of};
use super::fence::{Claim, Fence, Held};
use super::key::{KeyScope, derive_key, fingerprint};
use super::spec::{Effect, NormalizedArgs, Reach};
use super::{ExecutionRecord, LedgerState};
use crate::domain::{LedgerKey, SendWindow, to_delta};
use crate::metrics::Metrics;
use crate::store::{LedgerStore, NewExecution, Store, TakeOver};

/// Losing a race to take over can repeat only so often before we report "in progress".
const MAX_DECISION_ROUNDS: usize = 4;
/// Storing an outcome that hits a database error is tried this many times (with doubling
/// pauses from [`SETTLE_RETRY_PAUSE`]) before the turn fails and its retry takes the row over.
const SETTLE_TRIES: u32 = 5;
const SETTLE_RETRY_PAUSE: Duration = Duration::from_millis(50);

/// An attempt that holds its row under a lease: a fresh reservation, or a takeover.
struct Leased {
    held: Held,
    previous: Option<LedgerState>,
    predecessor_sends_until: Option<Instant>,
    /// Set when the handler's own transaction stored the outcome (see `Fence::Held`).
    settled: AtomicBool,
}

impl Leased {
    fn fresh(execution: i64) -> Self {
        Self {
            held: Held { execution, generation: 1 },
            previous: None,
            predecessor_sends_until: None,
            settled: AtomicBool::new(false),
        }
    }

    fn attempt(&self) -> Attempt<'_> {
        Attempt {
            fence: Fence::Held { held: self.held, settled: &self.settled },
            previous: self.previous,
            predecessor_sends_until: self.predecessor_sends_until,
        }
    }
}

#[derive(Clone)]
pub struct Executor {
    store: Store,
    lease: Duration,
    metrics: Option<Metrics>,
}

impl Executor {
    pub fn new(store: Store, lease: Duration) -> Self {
        Self { store, lease, metrics: None }
    }

    /// Times every execution into `tool_seconds`, by tool and outcome.
    pub fn with_metrics(mut self, metrics: Metrics) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Runs `tool` with `input`. Store failures are errors (the turn retries, labelled `error`
    /// in the metrics); everything about the call itself is an [`Outcome`].
    pub async fn execute(&self, tool: &dyn Tool, ctx: &CallContext<'_>, input: &Value) -> anyhow::Result<Outcome> {
        let started = Instant::now();
        let result = self.execute_untimed(tool, ctx, input).await;
        if let Some(metrics) = &self.metrics {
            let outcome = result.as_ref().map_or("error", Outcome::label);
            metrics.observe_tool(tool.spec().name, outcome, started.elapsed());
        }
        result
    }

    async fn execute_untimed(&self, tool: &dyn Tool, ctx: &CallContext<'_>, input: &Value) -> anyhow::Result<Outcome> {
        let spec = tool.spec();
        let args = match spec.normalize(input) {
            Ok(args) => args,
            Err(e) => return Ok(Outcome::Invalid(e)),
        };
        let Effect::Write { policy, on_conflict, reach } = spec.effect else {
            let call = ToolCall { ctx, args: &args, key: None, attempt: None, window: SendWindow::unbounded() };
            return Ok(match tool.run(&call).await {
                Ok(v) => Outcome::Executed(v),
                Err(ToolFailure::Permanent { message, details } | ToolFailure::Refused { message, details }) => {
                    Outcome::Failed { error: message, details }
                }
                Err(ToolFailure::Transient(e) | ToolFailure::Unknown(e)) => Outcome::Retryable { error: e },
            });
        };
        let scope =
            KeyScope { tenant: ctx.tenant.id, customer: ctx.customer, trigger_message_id: ctx.trigger_message_id };
        let key = derive_key(spec.name, policy, &scope, &spec.identity(&args))?;
        let fingerprint = fingerprint(&args);
        let arguments = args.to_value();
        let tenant = ctx.tenant.id;
        // Leases are on the database's clock (see `Store::db_time`); the handler keeps `ctx.now`.
        // The send window runs on the monotonic clock from the same moment.
        let taken = Instant::now();
        let now = self.store.db_time(ctx.now);
        let lease_until = now + to_delta(self.lease);

        let new = NewExecution {
            tenant,
            key: &key,
            tool: spec.name,
            fingerprint: &fingerprint,
            arguments: &arguments,
            conversation: ctx.conversation,
            contact: ctx.customer,
            turn: ctx.turn,
            tool_use_id: ctx.tool_use_id,
            turn_attempt: ctx.turn_attempt,
        };
        for _ in 0..MAX_DECISION_ROUNDS {
            // A repeat is answered from the stored row: one read, nothing written.
            let row = match self.store.probe_execution(tenant, &key).await? {
                Some(row) => row,
                // A local effect claims its key in its own transaction, with the effect.
                None if reach == Reach::Local => {
                    match self.run_claimed(tool, ctx, &args, &key, Claim::new(new.clone(), now)).await? {
                        Some(outcome) => return Ok(outcome),
                        // A concurrent call claimed the key first: answer from its row.
                        None => continue,
                    }
                }
                // An outside effect reserves its key, durably, before any request leaves.
                None => match self.store.reserve_execution(&new, now, lease_until).await? {
                    Some(id) => {
                        tracing::info!(tool = spec.name, %key, "executing");
                        return self.hold_and_run(tool, ctx, &args, &key, Leased::fresh(id), (now, taken)).await;
                    }
                    // A concurrent call reserved the key first: answer from its row.
                    None => continue,
                },
            };
            match decide(&row, &fingerprint, ctx, now, on_conflict) {
                Decision::Replay(outcome) => {
                    tracing::info!(tool = spec.name, %key, status = %row.status, "repeat answered from the ledger");
                    return Ok(outcome);
                }
                Decision::TakeOver => {
                    let takeover = TakeOver {
                        tenant,
                        id: row.id,
                        generation: row.generation,
                        fingerprint: &fingerprint,
                        arguments: &arguments,
                        turn: ctx.turn,
                        turn_attempt: ctx.turn_attempt,
                    };
                    if let Some(generation) = self.store.take_over_execution(&takeover, now, lease_until).await? {
                        tracing::warn!(tool = spec.name, %key, generation, previous = %row.status, "took over");
                        let leased = Leased {
                            held: Held { execution: row.id, generation },
                            previous: row.state(),
                            predecessor_sends_until: self.predecessor_sends_until(&row, now),
                            settled: AtomicBool::new(false),
                        };
                        return self.hold_and_run(tool, ctx, &args, &key, leased, (now, taken)).await;
                    }
                }
            }
        }
        Ok(Outcome::AlreadyInProgress)
    }

    /// Runs a local-effect tool on a key no row holds: the handler's transaction claims the
    /// key with its effect (see `ledger::fence`). A handler that ends without storing its
    /// outcome there (it had nothing to write, or it failed) has the outcome stored now, in one
    /// statement that also claims the key. `None` when a concurrent call holds the key: the
    /// caller answers from that call's row.
    async fn run_claimed(
        &self,
        tool: &dyn Tool,
        ctx: &CallContext<'_>,
        args: &NormalizedArgs,
        key: &LedgerKey,
        claim: Claim<'_>,
    ) -> anyhow::Result<Option<Outcome>> {
        tracing::info!(tool = tool.spec().name, %key, "executing");
        let attempt = Attempt { fence: Fence::Claim(&claim), previous: None, predecessor_sends_until: None };
        let call = ToolCall { ctx, args, key: Some(key), attempt: Some(attempt), window: SendWindow::unbounded() };
        let result = tool.run(&call).await;
        let (settlement, outcome) = settlement_of(&result);
        if result.is_ok() && claim.settled() {
            return Ok(Some(outcome));
        }
        if claim.lost() {
            // A concurrent duplicate holds the key: its row answers.
            return Ok(None);
        }
        if matches!(settlement.state, LedgerState::FailedTransient | LedgerState::OutcomeUnknown) {
            // Nothing happened (a local effect commits whole or not at all): nothing to store.
            return Ok(Some(outcome));
        }
        let stored = self.store.insert_settled_execution(&claim.new, &settlement, claim.now).await?;
        Ok(stored.map(|_| outcome))
    }

    /// Until when the holder of `row`, taken over now, may still send an outside request: a
    /// row left running after its lease ran out was held by an attempt whose window closed
    /// before it; one taken from a live earlier attempt of the same turn may have been renewed
    /// a moment ago, for a whole lease; one whose outcome is unknown was given up when it was
    /// settled, its request possibly still on its way.
    fn predecessor_sends_until(&self, row: &ExecutionRecord, now: DateTime<Utc>) -> Option<Instant> {
        match row.state()? {
            LedgerState::Running => {
                let live = row.locked_until.is_some_and(|until| until > now);
                Some(Instant::now() + if live { self.lease } else { Duration::ZERO })
            }
            LedgerState::OutcomeUnknown => {
                let ago = row.completed_at.map_or(Duration::ZERO, |at| (now - at).to_std().unwrap_or_default());
                Some(Instant::now().checked_sub(ago).unwrap_or_else(Instant::now))
            }
            _ => None,
        }
    }

    /// Runs the handler while renewing the lease, then stores the outcome under the same
    /// generation. `taken` is when the lease was taken, on the database's clock and on the
    /// monotonic one.
    async fn hold_and_run(
        &self,
        tool: &dyn Tool,
        ctx: &CallContext<'_>,
        args: &NormalizedArgs,
        key: &LedgerKey,
        leased: Leased,
        (now, taken): (DateTime<Utc>, Instant),
    ) -> anyhow::Result<Outcome> {
        let Held { execution: id, generation } = leased.held;
        let clock = || now + to_delta(taken.elapsed());
        let window = SendWindow::for_lease(taken, self.lease);
        let call = ToolCall { ctx, args, key: Some(key), attempt: Some(leased.attempt()), window: window.clone() };
        let tenant = ctx.tenant.id;
        let renew = async {
            let mut held_until = now + to_delta(self.lease);
            loop {
                tokio::time::sleep(self.lease / 3).await;
                let beat = Instant::now();
                let now = clock();
                let until = now + to_delta(self.lease);
                match self.store.renew_execution(tenant, id, generation, now, until).await {
                    Ok(true) => {
                        held_until = until;
                        window.renewed(beat, self.lease);
                    }
                    Ok(false) => {
                        window.close();
                        return;
                    }
                    // Could not renew: go on only while the lease we hold is surely valid, or a
                    // second holder could run alongside us.
                    Err(e) if now + to_delta(self.lease / 3) < held_until => {
                        tracing::warn!(error = %e, "ledger lease renewal failed; retrying")
                    }
                    Err(e) => {
                        tracing::error!(error = %e, "ledger lease could not be renewed before it ran out");
                        window.close();
                        return;
                    }
                }
            }
        };
        let result = tokio::select! {
            r = tool.run(&call) => r,
            () = renew => {
                tracing::warn!(%key, "lost the ledger lease while running; another attempt owns it");
                return Ok(Outcome::AlreadyInProgress);
            }
        };
        let (settlement, outcome) = settlement_of(&result);
        if result.is_ok() && leased.settled.load(Ordering::Acquire) {
            // The handler's transaction stored this outcome with its effect.
            return Ok(outcome);
        }
        let (mut pause, mut tries) = (SETTLE_RETRY_PAUSE, 1);
        loop {
            match self.store.settle_execution(tenant, id, generation, &settlement, clock()).await {
                Ok(true) => return Ok(outcome),
                Ok(false) => {
                    tracing::warn!(%key, "lease lost before the outcome could be stored");
                    return Ok(Outcome::AlreadyInProgress);
                }
                // The effect may have happened: the outcome must not be abandoned on a
                // passing database error.
                Err(e) if tries < SETTLE_TRIES => {
                    tracing::warn!(%key, error = %e, "storing the outcome failed; retrying");
                    tokio::time::sleep(pause).await;
                    (pause, tries) = (pause * 2, tries + 1);
                }
                Err(e) => return Err(e.into()),
            }
        }
    }
}
