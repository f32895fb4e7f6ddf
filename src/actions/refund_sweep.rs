//! The refund sweep: offers the refund of every charge paid too late (once per charge), and
//! finishes refunds whose confirmed action's execution was abandoned (its click job gave up
//! with the outcome unknown, or a worker died mid-call), so no refund stays half-done with its
//! money reserved. Finishing is running the action's own ledger call again: the executor
//! replays a settled one, leaves a live one alone, and takes over an abandoned one, which looks
//! the refund up at the provider before it sends anything.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::refund_offer::offer_refund;
use super::{ActionStatus, ExecuteAction};
use crate::domain::ActionId;
use crate::jobs::Replier;
use crate::ledger::{CallContext, Executor, Outcome};
use crate::pix::Gateways;
use crate::store::{ActionStore, InboundStore, RefundStore, Store, TenantStore};

/// Charges and refunds looked at per round.
const BATCH: i64 = 50;
/// A refund still processing this long after it was recorded may have been abandoned.
const ABANDONED_AFTER: TimeDelta = TimeDelta::minutes(1);

/// Offers the refund of every charge paid too late whose staff were not offered it yet.
pub async fn offer_due_refunds(store: &Store, replier: &Replier, now: DateTime<Utc>) -> anyhow::Result<usize> {
    let mut offered = 0;
    for (tenant_id, charge) in store.refunds_to_offer(BATCH).await? {
        let Some(tenant) = store.tenant(tenant_id).await? else { continue };
        offered += offer_refund(store, replier, &tenant, &charge, charge.refundable(), true, now).await?;
    }
    Ok(offered)
}

pub struct RefundSweep {
    store: Store,
    replier: Replier,
    executor: Executor,
    execute: ExecuteAction,
}

impl RefundSweep {
    pub fn new(store: Store, replier: Replier, gateways: Arc<Gateways>, lease: Duration) -> Self {
        Self {
            executor: Executor::new(store.clone(), lease),
            execute: ExecuteAction { store: store.clone(), replier: replier.clone(), gateways },
            store,
            replier,
        }
    }

    /// Runs the confirmed action of every refund still processing a while after it was
    /// recorded; returns how many calls ran (not replays).
    pub async fn resume(&self, now: DateTime<Utc>) -> anyhow::Result<usize> {
        let mut resumed = 0;
        for (tenant_id, refund) in self.store.stale_refunds(now - ABANDONED_AFTER, BATCH).await? {
            let Some(id) = ActionId::parse(&refund.action_id) else { continue };
            let (Some(tenant), Some(action)) =
                (self.store.tenant(tenant_id).await?, self.store.action(tenant_id, id).await?)
            else {
                continue;
            };
            let contact = self.store.conversation_contact(tenant_id, action.conversation).await?.contact_id;
            let ctx = CallContext {
                tool_use_id: Some("refund-sweep"),
                ..CallContext::outside_turn(&tenant, contact, action.conversation, now)
            };
            let input = json!({ "action_id": id.to_string() });
            match self.executor.execute(&self.execute, &ctx, &input).await? {
                Outcome::Executed(result) => {
                    resumed += 1;
                    tracing::info!(tenant = %tenant_id, refund = refund.id, "an abandoned refund was finished");
                    self.store.finish_action(tenant_id, id, ActionStatus::Executed, Some(&result), None, now).await?;
                }
                Outcome::Failed { error, .. } => {
                    self.store.finish_action(tenant_id, id, ActionStatus::Failed, None, Some(&error), now).await?;
                }
                // Settled (the poll settles it from here), in progress, or to retry next round.
                _ => {}
            }
        }
        Ok(resumed)
    }

    /// One round: offers, then resumes.
    pub async fn sweep(&self, now: DateTime<Utc>) -> anyhow::Result<usize> {
        Ok(offer_due_refunds(&self.store, &self.replier, now).await? + self.resume(now).await?)
    }
}

/// Sweeps every `every` until `stop`.
pub async fn run_refund_sweep(sweep: Arc<RefundSweep>, store: Store, every: Duration, stop: CancellationToken) {
    crate::supervise::periodically("offering and finishing refunds", every, stop, || {
        sweep.sweep(store.db_time(Utc::now()))
    })
    .await;
}
