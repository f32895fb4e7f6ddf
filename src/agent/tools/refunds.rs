//! The merchant's tools over charges already made: `propose_refund` proposes giving a paid
//! charge's money back (confirmed only by the merchant's button, like a charge), and
//! `cancel_pix_charge` closes a pending charge so nobody pays it. Both check the caller is staff.
//!
//! `propose_refund` is keyed per turn like `propose_charge`; the refund itself is keyed by its
//! action. `cancel_pix_charge` is keyed by the charge: it closes the charge here at once and
//! the withdrawal sweep cancels it at the provider (where a payment that came first takes the
//! paid path and is offered back).

use async_trait::async_trait;
use chrono::Utc;
use serde_json::{Value, json};

use crate::actions::{ActionPayload, Proposal, Proposer, refund_offer_text};
use crate::domain::Cents;
use crate::ledger::{Effect, FieldKind, FieldSpec, KeyPolicy, Reach, Tool, ToolCall, ToolFailure, ToolSpec};
use crate::money::charges::is_refundable_status;
use crate::money::refunds::too_much;
use crate::store::{ChargeStore, InboundStore, Store, TenantStore};

/// Refuses a caller who is not the tenant's staff.
async fn staff_only(store: &Store, call: &ToolCall<'_>, what: &str) -> Result<(), ToolFailure> {
    let ctx = call.ctx;
    let contact = store.conversation_contact(ctx.tenant.id, ctx.conversation).await.map_err(ToolFailure::storage)?;
    let staff = store
        .is_staff(ctx.tenant.id, contact.wa_id.as_ref())
        .await
        .map_err(|e| ToolFailure::Transient(e.to_string()))?;
    if staff {
        Ok(())
    } else {
        Err(ToolFailure::permanent(format!("only the business's staff can {what}"), json!({ "reason": "not_staff" })))
    }
}

pub struct ProposeRefund {
    pub proposer: Proposer,
}

pub static PROPOSE_REFUND: ToolSpec = ToolSpec {
    name: "propose_refund",
    description: "Prepares giving back (devolução) all or part of a paid Pix charge. Nothing is refunded yet: the \
                  merchant receives Confirmar/Cancelar buttons and only the button refunds (no text moves money).",
    effect: Effect::Write {
        policy: KeyPolicy::PerTurn,
        on_conflict: "This refund was already proposed in this request.",
        reach: Reach::Outside,
    },
    fields: &[
        FieldSpec {
            name: "charge_id",
            kind: FieldKind::Id,
            required: true,
            identity: true,
            description: "The paid charge (charge_id from list_charges).",
        },
        FieldSpec {
            name: "amount",
            kind: FieldKind::Money,
            required: false,
            identity: true,
            description: "Amount in BRL to give back, like 20.00; omit to give back everything still refundable.",
        },
    ],
};

#[async_trait]
impl Tool for ProposeRefund {
    fn spec(&self) -> &'static ToolSpec {
        &PROPOSE_REFUND
    }

    async fn run(&self, call: &ToolCall<'_>) -> Result<Value, ToolFailure> {
        let ctx = call.ctx;
        let store = &self.proposer.store;
        staff_only(store, call, "refund").await?;
        let id = call.args.i64("charge_id").unwrap_or_default();
        let charge = store.charge(ctx.tenant.id, id).await.map_err(ToolFailure::storage)?.ok_or_else(|| {
            ToolFailure::permanent(format!("charge {id} not found"), json!({ "reason": "not_found" }))
        })?;
        if !is_refundable_status(&charge.status) {
            return Err(too_much(&charge));
        }
        let refundable = charge.refundable();
        let amount = match call.args.str("amount") {
            Some(raw) => Cents::parse_brl(raw).map_err(|e| ToolFailure::permanent(e.to_string(), Value::Null))?,
            None => refundable,
        };
        if amount.0 <= 0 || amount > refundable {
            return Err(too_much(&charge));
        }
        let text = refund_offer_text(&charge, amount, false).map_err(|e| ToolFailure::Transient(e.to_string()))?;
        let payload = ActionPayload::Refund { charge_id: id, amount, offer: None };
        self.proposer.propose(call, Proposal::new(payload, text, ctx.now)).await
    }
}

pub struct CancelPixCharge {
    pub store: Store,
}

pub static CANCEL_PIX_CHARGE: ToolSpec = ToolSpec {
    name: "cancel_pix_charge",
    description: "Cancels a pending Pix charge so the customer can no longer pay it (also at the Pix provider). A \
                  charge paid meanwhile is not cancelled: it shows as paid, and can be refunded with propose_refund.",
    effect: Effect::Write {
        policy: KeyPolicy::Business,
        on_conflict: "This charge was already cancelled.",
        reach: Reach::Local,
    },
    fields: &[FieldSpec {
        name: "charge_id",
        kind: FieldKind::Id,
        required: true,
        identity: true,
        description: "The pending charge (charge_id from list_charges).",
    }],
};

#[async_trait]
impl Tool for CancelPixCharge {
    fn spec(&self) -> &'static ToolSpec {
        &CANCEL_PIX_CHARGE
    }

    async fn run(&self, call: &ToolCall<'_>) -> Result<Value, ToolFailure> {
        staff_only(&self.store, call, "cancel charges").await?;
        let tenant = call.ctx.tenant.id;
        let id = call.args.i64("charge_id").unwrap_or_default();
        let now = self.store.db_time(Utc::now());
        // pending → cancelled is one conditional update; the withdrawal sweep takes it from there.
        if self.store.close_charge(tenant, id, "cancelled", now).await.map_err(ToolFailure::storage)? {
            return Ok(json!({ "charge_id": id, "status": "cancelled" }));
        }
        match self.store.charge(tenant, id).await.map_err(ToolFailure::storage)? {
            // Cancelled already (by this call before a crash, or by anyone): the asked-for end
            // holds, and the withdrawal sweep takes it from there as well.
            Some(charge) if charge.status == "cancelled" => Ok(json!({ "charge_id": id, "status": "cancelled" })),
            Some(charge) => Err(ToolFailure::permanent(
                format!("charge {id} is {}, not pending: nothing to cancel", charge.status),
                json!({ "reason": "not_pending", "status": charge.status }),
            )),
            None => Err(ToolFailure::permanent(format!("charge {id} not found"), json!({ "reason": "not_found" }))),
        }
    }
}
