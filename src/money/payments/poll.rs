//! The poller: webhooks get lost, so charges still pending at a real provider after a while are
//! asked about, through the same paid path.

use std::sync::Arc;
use std::time::Duration;

use chrono::{TimeDelta, Utc};
use tokio_util::sync::CancellationToken;

use super::process::{Settled, settle};
use crate::jobs::Replier;
use crate::pix::{Gateways, PaymentState};
use crate::store::{ChargeStore, PaymentStore, Store, TenantStore};

/// A charge younger than this is left to its notification.
const GRACE: TimeDelta = TimeDelta::minutes(2);
/// Each pending charge is asked about at most this often.
const EVERY: TimeDelta = TimeDelta::minutes(1);
const BATCH: i64 = 50;

/// Asks about pending charges due a check at `now`; returns how many were found paid.
pub async fn poll_pending(
    store: &Store,
    replier: &Replier,
    gateways: &Gateways,
    now: chrono::DateTime<Utc>,
) -> anyhow::Result<usize> {
    let mut paid = 0;
    for (tenant, charge) in store.charges_to_check(now - GRACE, now - EVERY, BATCH, now).await? {
        let Some(tenant) = store.tenant(tenant).await? else { continue };
        match settle(store, replier, gateways, &tenant, &charge).await {
            Ok(Settled::Paid | Settled::Alerted) => paid += 1,
            Ok(Settled::NotPaid(PaymentState::Expired)) => {
                store.close_charge(tenant.id, charge.id, "expired", now).await?;
            }
            Ok(Settled::NotPaid(PaymentState::Cancelled)) => {
                store.close_charge(tenant.id, charge.id, "cancelled", now).await?;
            }
            Ok(Settled::NotPaid(_)) => {}
            Err(e) => tracing::warn!(tenant = %tenant.id, charge = charge.id, error = %e, "polling a charge failed"),
        }
    }
    Ok(paid)
}

pub async fn run_poller(
    store: Store,
    replier: Replier,
    gateways: Arc<Gateways>,
    every: Duration,
    stop: CancellationToken,
) {
    crate::supervise::periodically("polling pending charges", every, stop, || {
        poll_pending(&store, &replier, &gateways, store.db_time(Utc::now()))
    })
    .await;
}
