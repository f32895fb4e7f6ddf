//! Withdrawing charges at their provider: a charge that can no longer be paid here (its
//! deposit's hold ran out, its booking was cancelled, the provider reported it expired, the
//! merchant cancelled it in the console) is cancelled there too, so nobody pays it later.
//!
//! Invariants:
//! - the cancellation runs through the ledger keyed by the charge (`cancel_charge`, a business
//!   key), so sweeps, retries and two console clicks send it once;
//! - a provider that says the charge was paid first wins: nothing is cancelled, and the payment
//!   takes the paid path ([`mark_paid`]), which confirms a deposit whose slot is still free, or
//!   tells the merchant a payment came for a charge no longer pending;
//! - a charge the provider will not cancel (and that is not paid) is recorded as withdrawn all
//!   the same, with an error in the log for the operator: the sweep must not retry it forever.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::create::gateway_failure;
use super::paid::mark_paid;
use crate::domain::ContactId;
use crate::jobs::Replier;
use crate::ledger::{
    CallContext, Effect, Executor, FieldKind, FieldSpec, KeyPolicy, Outcome, Reach, Tool, ToolCall, ToolFailure,
    ToolSpec,
};
use crate::pix::{CancelOutcome, ChargeRef, Gateways, PixSettings};
use crate::store::{ChargeStore, InboundStore, Store, TenantStore};
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
        let gateway = self.gateways.for_tenant(tenant.id, &settings).map_err(gateway_failure)?;
        let reference = ChargeRef { txid: charge.txid.clone(), provider_ref: charge.provider_ref.clone() };
        match gateway.cancel(&reference).await.map_err(gateway_failure)? {
            CancelOutcome::Cancelled => {
                let now = self.store.db_time(Utc::now());
                self.store.mark_withdrawn(tenant.id, id, now).await.map_err(ToolFailure::storage)?;
                Ok(json!({ "charge_id": id, "status": "withdrawn" }))
            }
            CancelOutcome::Paid { end_to_end_id } => {
                tracing::info!(tenant = %tenant.id, charge = id, "paid before it could be withdrawn");
                mark_paid(&self.store, &self.replier, tenant, id, end_to_end_id.as_deref())
                    .await
                    .map_err(ToolFailure::storage)?;
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

    /// Withdraws every charge closed here but not yet at its provider; returns how many.
    pub async fn withdraw_due(&self, now: DateTime<Utc>) -> anyhow::Result<usize> {
        let mut done = 0;
        for (tenant_id, charge) in self.store.charges_to_withdraw(BATCH).await? {
            let Some(tenant) = self.store.tenant(tenant_id).await? else { continue };
            match self.withdraw(&tenant, charge.id, "sweep", now).await? {
                Outcome::Executed(_) | Outcome::AlreadyDone(_) => done += 1,
                Outcome::AlreadyInProgress => {}
                Outcome::Retryable { error } => {
                    tracing::warn!(tenant = %tenant.id, charge = charge.id, %error, "withdrawing a charge failed for now; retrying at the next sweep");
                }
                other => {
                    tracing::error!(tenant = %tenant.id, charge = charge.id, outcome = ?other, "the provider would not withdraw this charge; withdraw it in the provider's panel");
                    self.store.mark_withdrawn(tenant.id, charge.id, now).await?;
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
