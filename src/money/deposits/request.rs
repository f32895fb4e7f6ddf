//! Charging a held appointment's deposit: the ledger tool `create_deposit` and the sweep that
//! runs it for every held appointment without a charge.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::booking::Appointment;
use crate::domain::{ContactId, ConversationId, TenantId};
use crate::jobs::Replier;
use crate::ledger::{
    CallContext, Effect, Executor, FieldKind, FieldSpec, KeyPolicy, Outcome, Reach, Tool, ToolCall, ToolFailure,
    ToolSpec,
};
use crate::messages::{DepositText, deposit_text};
use crate::money::charges::{ChargeOrder, PAYER_DOCUMENT_REQUIRED, create_charge};
use crate::pix::Gateways;
use crate::store::{BookingStore, DepositStore, InboundStore, LedgerStore, OutboxStore, Store, TenantStore};
use crate::tenant::Tenant;
use crate::whatsapp::OutboundMessage;

/// Held appointments looked at per sweep.
const BATCH: i64 = 100;

pub static CREATE_DEPOSIT: ToolSpec = ToolSpec {
    name: "create_deposit",
    description: "Sends the customer the Pix charge for a held booking's deposit (never offered to the model).",
    effect: Effect::Write {
        policy: KeyPolicy::Business,
        on_conflict: "This deposit was already charged.",
        reach: Reach::Outside,
    },
    fields: &[FieldSpec {
        name: "appointment_id",
        kind: FieldKind::Id,
        required: true,
        identity: true,
        description: "The held appointment.",
    }],
};

pub struct CreateDeposit {
    pub store: Store,
    pub replier: Replier,
    pub gateways: Arc<Gateways>,
}

fn permanent_because(message: String, reason: &str) -> ToolFailure {
    ToolFailure::Permanent { message, details: json!({ "reason": reason }) }
}

#[async_trait]
impl Tool for CreateDeposit {
    fn spec(&self) -> &'static ToolSpec {
        &CREATE_DEPOSIT
    }

    async fn run(&self, call: &ToolCall<'_>) -> Result<Value, ToolFailure> {
        let ctx = call.ctx;
        let id = call.args.i64("appointment_id").unwrap_or_default();
        let appointment = self
            .store
            .appointment(ctx.tenant.id, id)
            .await
            .map_err(ToolFailure::storage)?
            .filter(|a| a.contact_id == ctx.customer.0)
            .ok_or_else(|| permanent_because(format!("appointment {id} not found for this customer"), "not_found"))?;
        // The hold's end fixes the request; whether it still holds is a rule checked after the
        // lookup that follows an unknown outcome (see `ChargeOrder::refusal`).
        let until = appointment
            .hold_expires_at
            .filter(|_| appointment.deposit_cents > 0)
            .ok_or_else(|| permanent_because(format!("appointment {id} is not held for a deposit"), "not_held"))?;
        let refusal = appointment
            .awaiting_deposit()
            .is_none_or(|until| until <= ctx.now)
            .then(|| permanent_because(format!("appointment {id} is not held for a deposit"), "not_held"));
        let contact =
            self.store.conversation_contact(ctx.tenant.id, ctx.conversation).await.map_err(ToolFailure::storage)?;
        let phone = contact
            .wa_id
            .ok_or_else(|| permanent_because("the customer has no WhatsApp number to charge".into(), "no_phone"))?;
        let (service, when) =
            super::describe(&self.store, ctx.tenant, &appointment).await.map_err(ToolFailure::storage)?;
        let description = deposit_text(DepositText::Description { service: &service, when: &when })
            .map_err(|e| ToolFailure::Transient(e.to_string()))?;
        let order = ChargeOrder {
            action: None,
            appointment: Some(appointment.id),
            customer_phone: &phone,
            payer_document: None,
            amount: appointment.deposit(),
            description: &description,
            merchant_conversation: None,
            expires_at: until,
            refusal,
        };
        create_charge(&self.store, &self.replier, &self.gateways, call, order).await
    }
}

/// Sends the deposit charges still missing. Built once; shared by the sweep.
pub struct DepositRequests {
    store: Store,
    executor: Executor,
    tool: CreateDeposit,
    /// Appointments whose charge failed for good, logged once each (the failure is replayed
    /// by the ledger at every sweep until the hold runs out).
    reported: Mutex<HashSet<(TenantId, i64)>>,
}

impl DepositRequests {
    /// Requests over `store`, queueing messages with `replier`; ledger leases last `lease`.
    pub fn new(store: Store, replier: Replier, gateways: Arc<Gateways>, lease: Duration) -> Self {
        Self {
            executor: Executor::new(store.clone(), lease),
            tool: CreateDeposit { store: store.clone(), replier, gateways },
            store,
            reported: Mutex::default(),
        }
    }

    /// Times the `create_deposit` executions into `metrics`.
    pub fn with_metrics(mut self, metrics: crate::metrics::Metrics) -> Self {
        self.executor = self.executor.with_metrics(metrics);
        self
    }

    /// Runs `create_deposit` for every held appointment without a charge at `now`, as its
    /// customer in their conversation; returns how many charges were sent.
    pub async fn request_due(&self, now: DateTime<Utc>) -> anyhow::Result<usize> {
        let mut due = self.store.holds_awaiting_charge(now, BATCH).await?;
        // A create a dead worker (or an unknown outcome) left unsettled is finished even when
        // its hold has lapsed since: the lookup comes first, so a payment made is recorded.
        for (tenant, arguments) in self.store.abandoned_calls(CREATE_DEPOSIT.name, now, BATCH).await? {
            let Some(id) = arguments["appointment_id"].as_i64() else { continue };
            if due.iter().any(|(t, a)| *t == tenant && a.id == id) {
                continue;
            }
            if let Some(appointment) = self.store.appointment(tenant, id).await? {
                due.push((tenant, appointment));
            }
        }
        let mut tenants: HashMap<TenantId, Option<Tenant>> = HashMap::new();
        let mut sent = 0;
        for (tenant_id, appointment) in &due {
            if !tenants.contains_key(tenant_id) {
                tenants.insert(*tenant_id, self.store.tenant(*tenant_id).await?);
            }
            let Some(Some(tenant)) = tenants.get(tenant_id) else { continue };
            let customer = ContactId(appointment.contact_id);
            let Some(conversation) = self.store.conversation_of_contact(tenant.id, customer).await? else { continue };
            let ctx = CallContext::outside_turn(tenant, customer, conversation, now);
            let input = json!({ "appointment_id": appointment.id });
            match self.executor.execute(&self.tool, &ctx, &input).await? {
                Outcome::Executed(_) => {
                    tracing::info!(tenant = %tenant.id, appointment = appointment.id, "deposit charge sent");
                    sent += 1;
                }
                Outcome::AlreadyDone(_) | Outcome::AlreadyInProgress => {}
                Outcome::Retryable { error } => {
                    tracing::warn!(tenant = %tenant.id, appointment = appointment.id, %error, "deposit charge failed for now; retrying at the next sweep");
                }
                // The gateway needs the customer's CPF or CNPJ: asked once (the key), and the
                // next sweep after they answer charges it (`turns::payer_document`).
                Outcome::Failed { details, .. } if details["reason"] == PAYER_DOCUMENT_REQUIRED => {
                    if self.ask_document(tenant, conversation, appointment, now).await? {
                        tracing::info!(tenant = %tenant.id, appointment = appointment.id, "deposit waits for the customer's CPF or CNPJ; asked");
                    }
                }
                other => {
                    let first = self.reported.lock().map(|mut r| r.insert((tenant.id, appointment.id))).unwrap_or(true);
                    if first {
                        tracing::error!(tenant = %tenant.id, appointment = appointment.id, outcome = ?other, "the deposit cannot be charged; the hold will run out");
                    }
                }
            }
        }
        // Forget what is no longer due, so the set stays as small as the failures.
        if let Ok(mut reported) = self.reported.lock() {
            reported.retain(|(t, id)| due.iter().any(|(dt, a)| dt == t && a.id == *id));
        }
        Ok(sent)
    }
}

impl DepositRequests {
    /// Asks the customer for the CPF or CNPJ the deposit's charge needs, once per appointment;
    /// whether the question was queued now.
    async fn ask_document(
        &self,
        tenant: &Tenant,
        conversation: ConversationId,
        appointment: &Appointment,
        now: DateTime<Utc>,
    ) -> anyhow::Result<bool> {
        let text = deposit_text(DepositText::AskDocument { amount: &appointment.deposit().to_string() })?;
        let key = format!("deposit:{}:document", appointment.id);
        let to = self.tool.replier.destination(tenant, conversation).await?;
        let Some(ask) = to.message(key, OutboundMessage::text(text)?) else { return Ok(false) };
        let queued = self.store.enqueue_outbound(&ask, now).await?.is_some();
        if queued {
            self.tool.replier.wake();
        }
        Ok(queued)
    }
}

/// Sweeps every `every` until `stop`.
pub async fn run_requests(requests: Arc<DepositRequests>, store: Store, every: Duration, stop: CancellationToken) {
    crate::supervise::periodically("charging deposits", every, stop, || {
        requests.request_due(store.db_time(Utc::now()))
    })
    .await;
}
