//! Processing stored notifications: ask the provider, then the paid path.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use chrono::{TimeDelta, Utc};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::PaymentEvent;
use crate::domain::TenantId;
use crate::jobs::Replier;
use crate::money::charges::{Charge, PaidOutcome, take_payment};
use crate::money::refunds::check_refunds;
use crate::pix::{ChargeRef, Gateways, PaymentState, PixSettings};
use crate::store::{NO_CHARGE_YET, PaymentStore, Store, TenantStore};
use crate::tenant::Tenant;

/// A provider that still says "pending" after this many tries is believed.
const MAX_ATTEMPTS: i64 = 10;
/// How long a claimed event is one process's: a process that dies mid-look leaves it to another
/// after this. The claim saves provider calls; it guards nothing (marking a charge paid is one
/// conditional update), so it is sized for the common look, not the longest: a look slower than
/// this (a provider near its timeout) may be repeated by another process, harmlessly. It was
/// 90 s, and the fault campaign showed what that costs: with servers killed and PostgreSQL
/// connections cut, 94 of 3,805 notifications were processed 85 s or more after they came,
/// 6 of them after 150 s.
const CLAIM_LEASE: TimeDelta = TimeDelta::seconds(20);
/// Looks for the charge of a notification that arrived first (1, 2, 4, 8 and 16 s apart).
const UNKNOWN_CHARGE_ATTEMPTS: i64 = 6;

/// What asking the provider about a charge led to.
pub(crate) enum Settled {
    Paid,
    /// Paid at the provider, but not pending here: the merchant was alerted.
    Alerted,
    /// The provider does not (yet) say it was paid.
    NotPaid(PaymentState),
}

/// Asks the provider about `charge` and, if it was paid, takes the paid path.
pub(crate) async fn settle(
    store: &Store,
    replier: &Replier,
    gateways: &Gateways,
    tenant: &Tenant,
    charge: &Charge,
) -> anyhow::Result<Settled> {
    let raw = tenant.settings.pix.clone().context("the tenant no longer has [pix] settings")?;
    let settings = PixSettings::from_raw(raw).map_err(anyhow::Error::msg)?;
    // The tenant's current provider knows only its own charges.
    if charge.gateway != settings.gateway.as_str() {
        anyhow::bail!("charge {} was created with {}, no longer the tenant's gateway", charge.id, charge.gateway);
    }
    let gateway = gateways.for_tenant(tenant.id, &settings)?;
    let asked = ChargeRef { txid: charge.txid.clone(), provider_ref: charge.provider_ref.clone() };
    let state = gateway.state(&asked).await?;
    let PaymentState::Paid { end_to_end_id } = state else { return Ok(Settled::NotPaid(state)) };
    Ok(match take_payment(store, replier, tenant, charge.id, end_to_end_id.as_deref()).await? {
        PaidOutcome::Paid(_) => Settled::Paid,
        PaidOutcome::Unchanged(now) if matches!(now.status.as_str(), "paid" | "partially_refunded" | "refunded") => {
            Settled::Paid
        }
        PaidOutcome::RefundDue(_) | PaidOutcome::Unchanged(_) => Settled::Alerted,
        PaidOutcome::NotFound => anyhow::bail!("charge {} vanished", charge.id),
    })
}

async fn process(store: &Store, replier: &Replier, gateways: &Gateways, event: &PaymentEvent) -> anyhow::Result<()> {
    let now = store.db_time(Utc::now());
    let tenant_id = TenantId(event.tenant_id);
    let Some(charge) = store.charge_by_ref(tenant_id, &event.ref_kind, &event.charge_ref).await? else {
        // A notification can beat the charge it is about: the provider created the payment but
        // its response is late or lost, and our create is being retried (which finds it). Look
        // again a few times (about a minute, which leaves a matched event most of its attempts),
        // sooner than the poller would, before calling it unmatched.
        if event.attempts + 1 < UNKNOWN_CHARGE_ATTEMPTS {
            let later = now + TimeDelta::seconds(1 << event.attempts.clamp(0, 5));
            store.retry_payment_event(event.id, NO_CHARGE_YET, later).await?;
            return Ok(());
        }
        tracing::warn!(tenant = %tenant_id, provider = %event.provider, event = %event.event_id, "payment notification for an unknown charge");
        store.finish_payment_event(event.id, "unmatched", None, Some("no such charge"), now).await?;
        return Ok(());
    };
    let tenant = store.tenant(tenant_id).await?.context("the tenant no longer exists")?;
    // A notification about a charge may be about its refund: those still processing are asked
    // about first (a failure here does not hold the payment back; the refund poll asks again).
    if let Err(e) = check_refunds(store, replier, gateways, &tenant, &charge).await {
        tracing::warn!(tenant = %tenant_id, charge = charge.id, error = %e, "asking about a charge's refunds failed");
    }
    match settle(store, replier, gateways, &tenant, &charge).await {
        Ok(Settled::Paid) => store.finish_payment_event(event.id, "processed", Some(charge.id), None, now).await?,
        Ok(Settled::Alerted) => store.finish_payment_event(event.id, "alerted", Some(charge.id), None, now).await?,
        Ok(Settled::NotPaid(state)) if event.attempts + 1 >= MAX_ATTEMPTS => {
            let note = format!("the provider says {state:?}");
            store.finish_payment_event(event.id, "processed", Some(charge.id), Some(&note), now).await?;
        }
        Ok(Settled::NotPaid(state)) => {
            // Notifications can arrive before the payment settles at the provider.
            let later = now + look_again_in(event.attempts);
            store.retry_payment_event(event.id, &format!("the provider says {state:?}"), later).await?;
        }
        Err(e) if event.attempts + 1 >= MAX_ATTEMPTS => {
            tracing::error!(tenant = %tenant_id, event = %event.event_id, error = %e, "giving up on a payment notification");
            store.finish_payment_event(event.id, "failed", Some(charge.id), Some(&format!("{e:#}")), now).await?;
        }
        Err(e) => {
            let later = now + look_again_in(event.attempts);
            store.retry_payment_event(event.id, &format!("{e:#}"), later).await?;
        }
    }
    Ok(())
}

/// When a charge's event looks again after `attempts` looks that did not settle it: 2 s,
/// doubling, at most 5 minutes (about 13 minutes over [`MAX_ATTEMPTS`]). A provider that timed
/// out once usually answers seconds later, and the customer is waiting for the receipt.
fn look_again_in(attempts: i64) -> TimeDelta {
    TimeDelta::seconds((2_i64 << attempts.clamp(0, 8)).min(300))
}

/// Processes every due event, each claimed for [`CLAIM_LEASE`]; returns how many were looked at.
pub async fn process_due(store: &Store, replier: &Replier, gateways: &Gateways) -> anyhow::Result<usize> {
    let mut total = 0;
    loop {
        let now = store.db_time(Utc::now());
        let Some(event) = store.claim_payment_event(now, now + CLAIM_LEASE).await? else { return Ok(total) };
        if let Err(e) = process(store, replier, gateways, &event).await {
            // A look cut off by a database error (a connection the server lost) is not left to
            // its claim: it comes again in seconds, to any process.
            tracing::warn!(event = event.id, error = %e, "a look at a payment notification failed");
            let later = store.db_time(Utc::now()) + look_again_in(event.attempts);
            store.retry_payment_event(event.id, &format!("{e:#}"), later).await?;
        }
        total += 1;
    }
}

/// Processes events when woken by a notification, and every `every` for the retries.
pub async fn run_processor(
    store: Store,
    replier: Replier,
    gateways: Arc<Gateways>,
    wake: Arc<Notify>,
    every: Duration,
    stop: CancellationToken,
) {
    loop {
        if let Err(e) = process_due(&store, &replier, &gateways).await {
            tracing::warn!(error = %e, "processing payment notifications failed; trying again later");
        }
        tokio::select! {
            () = stop.cancelled() => return,
            () = wake.notified() => {}
            () = tokio::time::sleep(every) => {}
        }
    }
}
