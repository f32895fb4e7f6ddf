//! Executing a confirmed refund action, inside its ledger call: reserve the money, ask the
//! provider (looking the refund up first after an unknown outcome), record what it said.
//!
//! Once the money is reserved (a refund row exists for the key), nothing on our side is
//! final: a changed gateway, missing settings, credentials or a lookup the provider refuses
//! are retried, never recorded as a failure that would give the reservation back while a
//! request may have reached the provider. Only the provider refusing the refund itself is.

use serde_json::{Value, json};

use super::settle::{apply, request_of};
use crate::domain::{ActionId, Cents, ConversationId};
use crate::jobs::Replier;
use crate::ledger::{LedgerState, ToolCall, ToolFailure};
use crate::messages::{RefundText, refund_text};
use crate::money::charges::{Charge, is_refundable_status};
use crate::pix::{GatewayError, Gateways, PixSettings, RefundId, RefundReceipt, RefundState};
use crate::store::{ChargeStore, NewRefund, RefundStore, Reserved, Store};

/// A refusal before anything was reserved or sent, in words for the staff (the click's answer
/// shows it as it is).
pub fn refund_refusal(text: RefundText<'_>, reason: &str) -> ToolFailure {
    let message = refund_text(text).unwrap_or_else(|e| e.to_string());
    ToolFailure::permanent(message, json!({ "reason": "not_possible", "why": reason }))
}

/// The refusal of a refund larger than what `charge` can still give back.
pub fn too_much(charge: &Charge) -> ToolFailure {
    match charge.status.as_str() {
        "refunded" => refund_refusal(RefundText::AllRefunded, "exceeds_refundable"),
        status if is_refundable_status(status) && charge.refundable().0 == 0 => {
            refund_refusal(RefundText::AllRefunded, "exceeds_refundable")
        }
        status if is_refundable_status(status) => {
            refund_refusal(RefundText::TooMuch { refundable: &charge.refundable().to_string() }, "exceeds_refundable")
        }
        _ => refund_refusal(RefundText::NotPaid, "not_paid"),
    }
}

/// A refund request failed: unknown stays unknown (the next attempt looks it up first), and
/// anything else is retried: the refund row already holds its money (see the module doc).
fn retry(e: GatewayError) -> ToolFailure {
    match e {
        GatewayError::Unknown(reason) => ToolFailure::Unknown(reason),
        other => ToolFailure::Transient(other.to_string()),
    }
}

/// What a confirmed refund action asks for.
pub struct RefundOrder<'a> {
    pub action: ActionId,
    /// The offer it answers, when one offer went to several staff members.
    pub offer: Option<&'a str>,
    /// The staff member's conversation, where the action was confirmed.
    pub merchant: ConversationId,
    pub charge_id: i64,
    pub amount: Cents,
}

/// Refunds the order's amount of its charge (at most once for the call's key, and once for its
/// offer) and says where it stands.
pub async fn refund_charge(
    store: &Store,
    replier: &Replier,
    gateways: &Gateways,
    call: &ToolCall<'_>,
    order: RefundOrder<'_>,
) -> Result<Value, ToolFailure> {
    let RefundOrder { action, offer, merchant, charge_id, amount } = order;
    let tenant = call.ctx.tenant;
    let (Some(key), Some(attempt)) = (call.key, call.attempt) else {
        return Err(ToolFailure::Transient("refunds run through the ledger".into()));
    };
    let charge = store.charge(tenant.id, charge_id).await.map_err(ToolFailure::storage)?.ok_or_else(|| {
        ToolFailure::permanent(format!("charge {charge_id} not found"), json!({ "reason": "not_found" }))
    })?;
    let reserved = store.refund_by_key(tenant.id, key).await.map_err(ToolFailure::storage)?.is_some();
    // Our side's problems are final only while nothing is reserved.
    let ours = |failure: ToolFailure| match failure {
        ToolFailure::Permanent { message, .. } if reserved => ToolFailure::Transient(message),
        other => other,
    };
    let settings = tenant
        .settings
        .pix
        .clone()
        .ok_or_else(|| refund_refusal(RefundText::PixNotConfigured, "pix_not_configured"))
        .and_then(|raw| {
            PixSettings::from_raw(raw).map_err(|_| refund_refusal(RefundText::PixNotConfigured, "pix_not_configured"))
        })
        .map_err(ours)?;
    // The tenant's current provider knows only its own payments.
    if charge.gateway != settings.gateway.as_str() {
        return Err(ours(refund_refusal(RefundText::GatewayChanged { gateway: &charge.gateway }, "gateway_changed")));
    }
    let refund_id = RefundId::for_key(key);
    let new = NewRefund {
        tenant: tenant.id,
        charge: charge_id,
        action,
        offer,
        key,
        refund_id: refund_id.as_str(),
        gateway: &charge.gateway,
        amount,
        merchant_conversation: Some(merchant),
    };
    let now = store.db_time(chrono::Utc::now());
    let refund = match store.reserve_refund(&new, now).await.map_err(ToolFailure::storage)? {
        Reserved::Refund(refund) => refund,
        Reserved::Sibling(_) => return Err(refund_refusal(RefundText::ConfirmedByAnother, "confirmed_by_another")),
        Reserved::Exceeds { .. } => {
            let now = store.charge(tenant.id, charge_id).await.map_err(ToolFailure::storage)?;
            return Err(now.as_ref().map_or_else(|| refund_refusal(RefundText::NotPaid, "not_paid"), too_much));
        }
        Reserved::NoCharge => {
            return Err(ToolFailure::permanent(
                format!("charge {charge_id} not found"),
                json!({ "reason": "not_found" }),
            ));
        }
    };
    // Settled by an attempt that died before settling the call, or by the poll meanwhile.
    if refund.status != "processing" {
        return Ok(refund.to_json());
    }
    let gateway = gateways.for_tenant(tenant.id, &settings).map_err(retry)?;
    // Taken over from a worker that may still be sending: a provider that does not deduplicate
    // (Asaas) gets time to land its request before the lookup below can see it.
    if let (Some(until), Some(lands)) = (attempt.predecessor_sends_until, gateway.late_create_window()) {
        tokio::time::sleep_until((until + lands).into()).await;
    }
    let request = request_of(&charge, &refund, call.window.clone());
    let looked_up = match attempt.previous {
        Some(LedgerState::OutcomeUnknown | LedgerState::Running) => {
            gateway.find_refund(&request).await.map_err(retry)?
        }
        _ => None,
    };
    let receipt = match looked_up {
        Some(found) => found,
        None => match gateway.refund(&request).await {
            Ok(receipt) => receipt,
            // Refused: recorded failed below, which gives the reservation back.
            Err(GatewayError::Rejected(reason)) => {
                RefundReceipt { state: RefundState::Failed(reason), provider_ref: None }
            }
            Err(e) => return Err(retry(e)),
        },
    };
    // Done or refused, the staff member is told by the settlement's notice; processing, by the
    // click's answer. A refusal is a result too: the refund was asked for and recorded failed.
    let settled = apply(store, replier, tenant, &charge, &refund, receipt).await.map_err(ToolFailure::storage)?;
    Ok(settled.to_json())
}
