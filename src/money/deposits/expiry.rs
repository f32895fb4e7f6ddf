//! Holds that ran out: each appointment expires (its slot free again), its charge with it, and
//! its customer is told once, unless they opted out of proactive messages (`crate::privacy`).

use std::collections::HashMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio_util::sync::CancellationToken;

use crate::booking::Appointment;
use crate::domain::{ContactId, TenantId};
use crate::jobs::Replier;
use crate::messages::{DepositText, deposit_text};
use crate::money::charges::inside_window;
use crate::store::{ChargeStore, DepositStore, InboundStore, NewOutbound, PrivacyStore, Store, TenantStore};
use crate::tenant::Tenant;
use crate::whatsapp::OutboundMessage;

/// Holds looked at per batch.
const BATCH: i64 = 100;

/// The customer's notice, keyed by the appointment so it is queued once; none when the
/// customer has no conversation or is outside the 24-hour window (nothing would reach them).
async fn notice(
    store: &Store,
    replier: &Replier,
    tenant: &Tenant,
    appointment: &Appointment,
    now: DateTime<Utc>,
) -> anyhow::Result<Option<NewOutbound>> {
    let Some(conversation) = store.conversation_of_contact(tenant.id, ContactId(appointment.contact_id)).await? else {
        return Ok(None);
    };
    if store.is_silenced(tenant.id, ContactId(appointment.contact_id)).await? {
        tracing::info!(tenant = %tenant.id, appointment = appointment.id, "hold expired; customer opted out, not told");
        return Ok(None);
    }
    if !inside_window(store.last_inbound_at(tenant.id, conversation).await?, now) {
        tracing::info!(tenant = %tenant.id, appointment = appointment.id, "hold expired outside the 24-hour window; customer not told");
        return Ok(None);
    }
    let (service, when) = super::describe(store, tenant, appointment).await?;
    let text = deposit_text(DepositText::Expired { service: &service, when: &when })?;
    let key = format!("deposit:{}:expired", appointment.id);
    let to = replier.destination(tenant, conversation).await?;
    Ok(Some(to.message(key, OutboundMessage::text(text)?).ok_or_else(|| anyhow::anyhow!("bad outbox key"))?))
}

/// Expires every hold that ran out by `now`; returns how many.
pub async fn expire_due(store: &Store, replier: &Replier, now: DateTime<Utc>) -> anyhow::Result<usize> {
    let mut tenants: HashMap<TenantId, Option<Tenant>> = HashMap::new();
    let mut total = 0;
    loop {
        let lapsed = store.lapsed_holds(now, BATCH).await?;
        let mut expired = 0;
        for (tenant_id, appointment) in &lapsed {
            if !tenants.contains_key(tenant_id) {
                tenants.insert(*tenant_id, store.tenant(*tenant_id).await?);
            }
            let Some(Some(tenant)) = tenants.get(tenant_id) else { continue };
            let notice = notice(store, replier, tenant, appointment, now).await?;
            if store.expire_hold(tenant.id, appointment.id, notice.as_ref(), now).await?.is_some() {
                tracing::info!(tenant = %tenant.id, appointment = appointment.id, "deposit hold expired; slot released");
                expired += 1;
            }
        }
        total += expired;
        // Another sweep may have taken the same rows: stop when a batch moved nothing.
        if (lapsed.len() as i64) < BATCH || expired == 0 {
            break;
        }
    }
    if total > 0 {
        replier.wake();
    }
    Ok(total)
}

/// Sweeps every `every` until `stop`.
pub async fn run_expiry(store: Store, replier: Replier, every: Duration, stop: CancellationToken) {
    crate::supervise::periodically("expiring deposit holds", every, stop, || {
        expire_due(&store, &replier, store.db_time(Utc::now()))
    })
    .await;
}
