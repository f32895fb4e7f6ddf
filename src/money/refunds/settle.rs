//! Settling refunds: what a provider says of a refund (at the click, in its notification, to
//! the poll) recorded once, with its notices; and the sweep that polls refunds still
//! processing.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio_util::sync::CancellationToken;

use super::Refund;
use crate::domain::{ConversationId, LedgerKey, SendWindow};
use crate::jobs::Replier;
use crate::messages::{RefundText, refund_text};
use crate::money::charges::{Charge, inside_window, merchants};
use crate::pix::{ChargeRef, Gateways, PixSettings, RefundId, RefundReceipt, RefundRequest, RefundState};
use crate::store::{ChargeStore, Destination, NewOutbound, RefundStore, Store, TenantStore};
use crate::tenant::Tenant;
use crate::whatsapp::OutboundMessage;

/// Refunds and charges looked at per sweep.
const BATCH: i64 = 50;

/// The provider request of `refund`, of `charge`.
pub(super) fn request_of(charge: &Charge, refund: &Refund, window: crate::domain::SendWindow) -> RefundRequest {
    RefundRequest {
        charge: ChargeRef { txid: charge.txid.clone(), provider_ref: charge.provider_ref.clone() },
        end_to_end_id: charge.end_to_end_id.clone(),
        id: RefundId::from_stored(refund.refund_id.clone()),
        provider_ref: refund.provider_ref.clone(),
        amount: refund.amount(),
        window,
    }
}

/// The staff who hear of `refund`: the one who confirmed it, else whoever speaks for the charge.
async fn staff_of(
    store: &Store,
    replier: &Replier,
    tenant: &Tenant,
    charge: &Charge,
    refund: &Refund,
) -> anyhow::Result<Vec<Destination>> {
    match refund.merchant_conversation_id {
        Some(conversation) => Ok(vec![replier.destination(tenant, ConversationId(conversation)).await?]),
        None => merchants(store, replier, tenant, charge).await,
    }
}

fn text_to(to: &Destination, key: String, text: &str) -> anyhow::Result<Option<NewOutbound>> {
    Ok(to.message(key, OutboundMessage::text(text.to_owned())?))
}

/// Records what the provider said of `refund` and queues who must hear of it; returns the
/// refund as it stands now. The staff member hears of a settled refund from here only (never
/// from the click's answer), so whichever path settles it, the click, a notification or the
/// poll, they are told once.
pub(super) async fn apply(
    store: &Store,
    replier: &Replier,
    tenant: &Tenant,
    charge: &Charge,
    refund: &Refund,
    receipt: RefundReceipt,
) -> anyhow::Result<Refund> {
    let now = store.db_time(Utc::now());
    let amount = refund.amount().to_string();
    let key = |part: &str| format!("refund:{}:{part}", refund.refund_id);
    // Who hears of it is looked up only when it settles (not at every poll of one processing).
    let settled = match receipt.state {
        RefundState::Processing => {
            store.note_refund_progress(tenant.id, refund.id, receipt.provider_ref.as_deref(), now).await?;
            None
        }
        RefundState::Done => {
            let staff = staff_of(store, replier, tenant, charge, refund).await?;
            let mut notices = Vec::new();
            // Outside the 24-hour window no free text reaches the customer; their bank shows
            // the devolução anyway.
            let customer = ConversationId(charge.customer_conversation_id);
            if inside_window(store.last_inbound_at(tenant.id, customer).await?, now) {
                let text = refund_text(RefundText::ToCustomer {
                    business: &tenant.name,
                    amount: &amount,
                    description: &charge.description,
                })?;
                notices.extend(text_to(&replier.destination(tenant, customer).await?, key("customer"), &text)?);
            }
            let text =
                refund_text(RefundText::Done { number: charge.id, amount: &amount, customer: &charge.customer_phone })?;
            for to in &staff {
                notices.extend(text_to(to, key(&format!("done:{}", to.conversation)), &text)?);
            }
            let settled = store
                .settle_refund(tenant.id, refund.id, receipt.provider_ref.as_deref(), &|_| notices.clone(), now)
                .await?
                .map(|(refund, _)| refund);
            if settled.is_some() {
                tracing::info!(tenant = %tenant.id, charge = charge.id, refund = refund.id, "refund done");
                replier.wake();
            }
            settled
        }
        RefundState::Failed(reason) => {
            let staff = staff_of(store, replier, tenant, charge, refund).await?;
            let text = refund_text(RefundText::Failed { number: charge.id, amount: &amount, reason: &reason })?;
            let mut notices = Vec::new();
            for to in &staff {
                notices.extend(text_to(to, key(&format!("failed:{}", to.conversation)), &text)?);
            }
            let failed = store.fail_refund(tenant.id, refund.id, &reason, &notices, now).await?;
            if failed.is_some() {
                tracing::warn!(tenant = %tenant.id, charge = charge.id, refund = refund.id, %reason, "refund refused");
                replier.wake();
            }
            failed
        }
    };
    match settled {
        Some(refund) => Ok(refund),
        // Still processing, or settled meanwhile by another path: as it stands now.
        None => {
            let key = LedgerKey::from_stored(refund.idempotency_key.clone());
            store.refund_by_key(tenant.id, &key).await?.ok_or_else(|| anyhow::anyhow!("refund {} vanished", refund.id))
        }
    }
}

/// Asks the provider about `refund` (still processing) and records the answer.
async fn check(
    store: &Store,
    replier: &Replier,
    gateways: &Gateways,
    tenant: &Tenant,
    charge: &Charge,
    refund: &Refund,
) -> anyhow::Result<()> {
    let Some(raw) = tenant.settings.pix.clone() else { return Ok(()) };
    let settings = PixSettings::from_raw(raw).map_err(|e| anyhow::anyhow!(e))?;
    if charge.gateway != settings.gateway.as_str() {
        tracing::warn!(tenant = %tenant.id, refund = refund.id, "the refund's provider is no longer the tenant's; check it in its panel");
        return Ok(());
    }
    let gateway = gateways.for_tenant(tenant.id, &settings)?;
    // A lookup only: nothing is sent, so no lease is needed.
    let request = request_of(charge, refund, SendWindow::unbounded());
    if let Some(receipt) = gateway.find_refund(&request).await? {
        apply(store, replier, tenant, charge, refund, receipt).await?;
    }
    Ok(())
}

/// The refunds of `charge` still processing, asked about now (its provider sent a notification
/// about it, which is how a refund's own notification settles it).
pub async fn check_refunds(
    store: &Store,
    replier: &Replier,
    gateways: &Gateways,
    tenant: &Tenant,
    charge: &Charge,
) -> anyhow::Result<()> {
    for refund in store.refunds_of_charge(tenant.id, charge.id).await? {
        if refund.status == "processing" {
            check(store, replier, gateways, tenant, charge, &refund).await?;
        }
    }
    Ok(())
}

/// Polls refunds still processing. Built once, run by the sweep.
pub struct Refunds {
    store: Store,
    replier: Replier,
    gateways: Arc<Gateways>,
}

impl Refunds {
    pub fn new(store: Store, replier: Replier, gateways: Arc<Gateways>) -> Self {
        Self { store, replier, gateways }
    }

    /// One round: asks about refunds still processing; returns how many it asked about.
    pub async fn sweep(&self, now: DateTime<Utc>) -> anyhow::Result<usize> {
        let mut done = 0;
        for (tenant_id, refund) in self.store.refunds_to_poll(now, BATCH).await? {
            let Some(tenant) = self.store.tenant(tenant_id).await? else { continue };
            let Some(charge) = self.store.charge(tenant_id, refund.charge_id).await? else { continue };
            if let Err(e) = check(&self.store, &self.replier, &self.gateways, &tenant, &charge, &refund).await {
                tracing::warn!(tenant = %tenant_id, refund = refund.id, error = %e, "asking about a refund failed; next sweep");
            } else {
                done += 1;
            }
        }
        Ok(done)
    }
}

/// Sweeps every `every` until `stop`.
pub async fn run_refunds(refunds: Arc<Refunds>, store: Store, every: Duration, stop: CancellationToken) {
    crate::supervise::periodically("settling refunds", every, stop, || refunds.sweep(store.db_time(Utc::now()))).await;
}
