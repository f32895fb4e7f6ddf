//! Withdrawing charges at their provider: a charge that can no longer be paid here (its
//! deposit's hold ran out, its booking was cancelled, the provider reported it expired, the
//! merchant cancelled it in the console) is cancelled there too, so nobody pays it later.
//!
//! Invariants:
//! - the cancellation runs through the ledger keyed by the charge (`cancel_charge`, a business
//!   key), so sweeps, retries and two console clicks send it once; a withdrawal whose worker
//!   died before settling it is finished by the sweep even when the charge no longer looks due
//!   (it was marked withdrawn, or paid, just before the crash);
//! - a provider that says the charge was paid first wins: nothing is cancelled, and the payment
//!   takes the paid path ([`take_payment`]), which confirms a deposit whose slot is still free,
//!   or tells the merchant a payment came for a charge no longer pending;
//! - only the provider that made the charge is asked (a tenant that changed gateways cannot
//!   withdraw the old one's charges here); credentials or settings that fail are retried at the
//!   next sweep, never taken for a withdrawal;
//! - a charge the provider refuses to cancel (and that is not paid), or one whose provider is
//!   no longer the tenant's, is recorded as withdrawn all the same, with an error in the log for
//!   the operator, so the sweep does not retry it forever; from the console the refusal is
//!   shown, and a later click tries again (a refusal releases the ledger key).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::paid::take_payment;
use crate::domain::ContactId;
use crate::jobs::Replier;
use crate::ledger::{
    CallContext, Effect, Executor, FieldKind, FieldSpec, KeyPolicy, Outcome, Reach, Tool, ToolCall, ToolFailure,
    ToolSpec,
};
use crate::pix::{CancelOutcome, ChargeRef, GatewayError, Gateways, PixSettings};
use crate::store::{ChargeStore, InboundStore, LedgerStore, Store, TenantStore};
use crate::tenant::Tenant;

/// Charges looked at per sweep.
const BATCH: i64 = 50;

pub static CANCEL_CHARGE: ToolSpec = ToolSpec {
    name: "cancel_charge",
    description: "Withdraws a Pix charge at its provider (never offered to the model).",
    effect: Effect::Write {
        policy: KeyPolicy::Business,
        on_conflict: "This charge was already withdrawn.",
        reach: Reach::Outside,
    },
    fields: &[FieldSpec {
        name: "charge_id",
        kind: FieldKind::Id,
        required: true,
        identity: true,
        description: "The charge.",
    }],
};

/// A cancellation that failed: unknown stays unknown (the next attempt sends it again, which
/// providers take as a no-op), a refusal releases the key, anything about our side (credentials,
/// settings) is retried.
fn cancel_failure(e: GatewayError) -> ToolFailure {
    match e {
        GatewayError::Unknown(reason) => ToolFailure::Unknown(reason),
        GatewayError::Rejected(reason) => ToolFailure::refused(
            format!("the Pix provider would not cancel the charge: {reason}"),
            json!({ "reason": "provider_refused" }),
        ),
        other => ToolFailure::Transient(other.to_string()),
    }
}

pub struct CancelCharge {
    pub store: Store,
    pub replier: Replier,
    pub gateways: Arc<Gateways>,
}

#[async_trait]
impl Tool for CancelCharge {
    fn spec(&self) -> &'static ToolSpec {
        &CANCEL_CHARGE
    }

    async fn run(&self, call: &ToolCall<'_>) -> Result<Value, ToolFailure> {
        let tenant = call.ctx.tenant;
        let id = call.args.i64("charge_id").unwrap_or_default();
        let charge = self.store.charge(tenant.id, id).await.map_err(ToolFailure::storage)?.ok_or_else(|| {
            ToolFailure::permanent(format!("charge {id} not found"), json!({ "reason": "not_found" }))
        })?;
        if !matches!(charge.status.as_str(), "pending" | "expired" | "cancelled") {
            // Paid (or to refund): nothing to withdraw.
            return Ok(json!({ "charge_id": id, "status": charge.status }));
        }
        let raw = tenant.settings.pix.clone().ok_or_else(|| {
            ToolFailure::permanent("Pix is not configured", json!({ "reason": "pix_not_configured" }))
        })?;
        let settings = PixSettings::from_raw(raw)
            .map_err(|e| ToolFailure::permanent(e, json!({ "reason": "pix_not_configured" })))?;
        // The tenant's current provider knows only its own charges.
        if charge.gateway != settings.gateway.as_str() {
            let message = format!(
                "charge {id} was made with {}, no longer the tenant's gateway: withdraw it in that provider's panel",
                charge.gateway
            );
            return Err(ToolFailure::permanent(message, json!({ "reason": "gateway_changed" })));
        }
        let gateway = self.gateways.for_tenant(tenant.id, &settings).map_err(cancel_failure)?;
        let reference = ChargeRef { txid: charge.txid.clone(), provider_ref: charge.provider_ref.clone() };
        match gateway.cancel(&reference).await.map_err(cancel_failure)? {
            CancelOutcome::Cancelled => {
                let now = self.store.db_time(Utc::now());
                self.store.mark_withdrawn(tenant.id, id, now).await.map_err(ToolFailure::storage)?;
                Ok(json!({ "charge_id": id, "status": "withdrawn" }))
            }
            CancelOutcome::Paid { end_to_end_id } => {
                tracing::info!(tenant = %tenant.id, charge = id, "paid before it could be withdrawn");
                take_payment(&self.store, &self.replier, tenant, id, end_to_end_id.as_deref())
                    .await
                    .map_err(ToolFailure::storage)?;
                // Paid here now, or closed here and the merchant told: nothing left to withdraw.
                let now = self.store.db_time(Utc::now());
                self.store.mark_withdrawn(tenant.id, id, now).await.map_err(ToolFailure::storage)?;
                Ok(json!({ "charge_id": id, "status": "paid" }))
            }
        }
    }
}

/// Withdraws charges through the ledger. Built once; shared by the sweep and the console.
pub struct Withdrawals {
    store: Store,
    executor: Executor,
    tool: CancelCharge,
}

impl Withdrawals {
    pub fn new(store: Store, replier: Replier, gateways: Arc<Gateways>, lease: Duration) -> Self {
        Self {
            executor: Executor::new(store.clone(), lease),
            tool: CancelCharge { store: store.clone(), replier, gateways },
            store,
        }
    }

    /// Withdraws charge `id` of `tenant` (pending, expired or cancelled) at its provider, on
    /// behalf of `by` (a sweep, a console user), and says what came of it.
    pub async fn withdraw(&self, tenant: &Tenant, id: i64, by: &str, now: DateTime<Utc>) -> anyhow::Result<Outcome> {
        let charge = self.store.charge(tenant.id, id).await?.ok_or_else(|| anyhow::anyhow!("no charge {id}"))?;
        let conversation = crate::domain::ConversationId(charge.customer_conversation_id);
        let customer: ContactId = self.store.conversation_contact(tenant.id, conversation).await?.contact_id;
        let ctx =
            CallContext { tool_use_id: Some(by), ..CallContext::outside_turn(tenant, customer, conversation, now) };
        self.executor.execute(&self.tool, &ctx, &json!({ "charge_id": id })).await
    }

    /// Withdraws every charge closed here but not yet at its provider, and finishes every
    /// withdrawal a dead worker left unsettled; returns how many were done.
    pub async fn withdraw_due(&self, now: DateTime<Utc>) -> anyhow::Result<usize> {
        let mut due: Vec<(crate::domain::TenantId, i64)> =
            self.store.charges_to_withdraw(BATCH).await?.into_iter().map(|(t, c)| (t, c.id)).collect();
        for (tenant, arguments) in self.store.abandoned_calls(CANCEL_CHARGE.name, now, BATCH).await? {
            if let Some(id) = arguments["charge_id"].as_i64().filter(|id| !due.contains(&(tenant, *id))) {
                due.push((tenant, id));
            }
        }
        let mut done = 0;
        for (tenant_id, id) in due {
            let Some(tenant) = self.store.tenant(tenant_id).await? else { continue };
            match self.withdraw(&tenant, id, "sweep", now).await? {
                Outcome::Executed(_) => done += 1,
                // Settled by an earlier round whose record of it was lost: record it now.
                Outcome::AlreadyDone(_) => {
                    self.store.mark_withdrawn(tenant.id, id, now).await?;
                    done += 1;
                }
                Outcome::AlreadyInProgress => {}
                Outcome::Retryable { error } => {
                    tracing::warn!(tenant = %tenant.id, charge = id, %error, "withdrawing a charge failed for now; retrying at the next sweep");
                }
                Outcome::Failed { error, .. } => {
                    tracing::error!(tenant = %tenant.id, charge = id, %error, "the charge could not be withdrawn at its provider; withdraw it in the provider's panel");
                    self.store.mark_withdrawn(tenant.id, id, now).await?;
                }
                other => {
                    tracing::error!(tenant = %tenant.id, charge = id, outcome = ?other, "unexpected outcome withdrawing a charge")
                }
            }
        }
        Ok(done)
    }
}

/// Sweeps every `every` until `stop`.
pub async fn run_withdrawals(withdrawals: Arc<Withdrawals>, store: Store, every: Duration, stop: CancellationToken) {
    crate::supervise::periodically("withdrawing closed charges", every, stop, || {
        withdrawals.withdraw_due(store.db_time(Utc::now()))
    })
    .await;
}
