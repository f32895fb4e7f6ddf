//! Executing a confirmed action: one ledger tool, `execute_action`, keyed by the action id, so
//! the click, its retry after a crash and a typed confirmation racing it share one key and
//! one effect.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};

use super::{ActionId, ActionPayload, ActionStatus};
use crate::appointments::{book, cancel, move_booking};
use crate::jobs::Replier;
use crate::ledger::{
    Effect, FieldKind, FieldSpec, KeyPolicy, LedgerState, Reach, Tool, ToolCall, ToolFailure, ToolSpec,
};
use crate::money::charges::{ChargeOrder, create_charge};
use crate::money::refunds::{RefundOrder, refund_charge};
use crate::pix::Gateways;
use crate::store::{ActionStore, AgendaStore, Store};

pub struct ExecuteAction {
    pub store: Store,
    pub replier: Replier,
    pub gateways: Arc<Gateways>,
}

pub static EXECUTE_ACTION: ToolSpec = ToolSpec {
    name: "execute_action",
    description: "Carries out a pending action a person confirmed (never offered to the model).",
    effect: Effect::Write {
        policy: KeyPolicy::Business,
        on_conflict: "This action was already carried out.",
        reach: Reach::Outside,
    },
    fields: &[FieldSpec {
        name: "action_id",
        kind: FieldKind::Text,
        required: true,
        identity: true,
        description: "The confirmed action.",
    }],
};

#[async_trait]
impl Tool for ExecuteAction {
    fn spec(&self) -> &'static ToolSpec {
        &EXECUTE_ACTION
    }

    async fn run(&self, call: &ToolCall<'_>) -> Result<Value, ToolFailure> {
        let ctx = call.ctx;
        let id = call
            .args
            .str("action_id")
            .and_then(ActionId::parse)
            .ok_or_else(|| ToolFailure::Permanent { message: "unknown action".into(), details: Value::Null })?;
        let action = self
            .store
            .action(ctx.tenant.id, id)
            .await
            .map_err(ToolFailure::storage)?
            .filter(|a| a.conversation == ctx.conversation)
            .ok_or_else(|| ToolFailure::Permanent { message: "unknown action".into(), details: Value::Null })?;
        // Only a confirmed action runs; one already executed was settled with its result and
        // is replayed by the ledger before this point.
        if !matches!(action.status, ActionStatus::Confirmed | ActionStatus::Executed | ActionStatus::Failed) {
            return Err(ToolFailure::Permanent {
                message: format!("action {id} is {}, not confirmed", action.status.as_str()),
                details: json!({ "reason": "not_confirmed" }),
            });
        }
        // A booking or move whose ledger row was superseded was undone since (its appointment
        // cancelled or moved again); the crash that left the action unfinished must not make a
        // retry, or an old Confirmar, book or move it once more.
        let undone = call.attempt.as_ref().is_some_and(|a| a.previous == Some(LedgerState::Superseded));
        if undone && matches!(action.payload, ActionPayload::Booking { .. } | ActionPayload::Move { .. }) {
            return Err(ToolFailure::Permanent {
                message: format!("action {id} was undone after it ran: its appointment changed since"),
                details: json!({ "reason": "not_active" }),
            });
        }
        match &action.payload {
            ActionPayload::Cancellation { booking_id } => cancel(&self.store, call, *booking_id).await,
            ActionPayload::Booking { service_id, professional_id, starts_at } => {
                book(&self.store, call, *service_id, *professional_id, *starts_at).await
            }
            ActionPayload::Move { booking_id, starts_at } => {
                move_booking(&self.store, call, *booking_id, *starts_at, None).await
            }
            ActionPayload::Charge { customer_phone, amount, description, payer_document } => {
                let order = ChargeOrder {
                    action: Some(id),
                    appointment: None,
                    customer_phone,
                    payer_document: payer_document.as_ref(),
                    amount: *amount,
                    description,
                    merchant_conversation: Some(action.conversation),
                    expires_at: action.created_at + crate::money::charges::CHARGE_TTL,
                    refusal: None,
                };
                create_charge(&self.store, &self.replier, &self.gateways, call, order).await
            }
            ActionPayload::Refund { charge_id, amount, offer } => {
                let order = RefundOrder {
                    action: id,
                    offer: offer.as_deref(),
                    merchant: action.conversation,
                    charge_id: *charge_id,
                    amount: *amount,
                };
                refund_charge(&self.store, &self.replier, &self.gateways, call, order).await
            }
            ActionPayload::Attendance { booking_id } => {
                let confirmed = self
                    .store
                    .confirm_attendance(ctx.tenant.id, ctx.customer, *booking_id, ctx.now)
                    .await
                    .map_err(ToolFailure::storage)?;
                match confirmed {
                    Some(a) => Ok(
                        json!({ "booking_id": a.id, "starts_at": a.starts_at.to_rfc3339(), "attendance": "confirmed" }),
                    ),
                    None => Err(ToolFailure::Permanent {
                        message: format!("booking {booking_id} is no longer active"),
                        details: json!({ "reason": "not_active" }),
                    }),
                }
            }
        }
    }
}
