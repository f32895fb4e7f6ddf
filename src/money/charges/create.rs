//! Creating a charge for a confirmed `charge` action, inside its ledger call.

use chrono::{TimeDelta, Utc};
use serde_json::{Value, json};

use super::Charge;
use super::delivery::{choose_via, customer_messages};
use crate::domain::{ActionId, Cents, ConversationId, PayerDocument, PhoneE164};
use crate::jobs::Replier;
use crate::ledger::{LedgerState, ToolCall, ToolFailure};
use crate::messages::{ActionText, ChargeVia, action_text};
use crate::pix::{ChargeRequest, GatewayError, Gateways, Payer, PixSettings, Txid};
use crate::store::{ChargeStore, Destination, InboundStore, NewCharge, Store};

/// The refusal's reason when the gateway needs the payer's CPF or CNPJ and none is known: the
/// deposit sweep asks the customer for it.
pub const PAYER_DOCUMENT_REQUIRED: &str = "payer_document_required";

/// How long a customer has to pay a merchant's charge, from its proposal.
pub const CHARGE_TTL: TimeDelta = TimeDelta::hours(24);

/// What a confirmed charge action asks for.
pub struct ChargeOrder<'a> {
    pub action: Option<ActionId>,
    pub appointment: Option<i64>,
    pub customer_phone: &'a PhoneE164,
    /// The payer's CPF or CNPJ given with this charge (stored on the customer's contact), if
    /// any; else the one the contact carries.
    pub payer_document: Option<&'a PayerDocument>,
    pub amount: Cents,
    pub description: &'a str,
    /// The merchant's conversation (where the action was confirmed); none for a deposit.
    pub merchant_conversation: Option<ConversationId>,
    /// When the customer can no longer pay it: fixed by the caller from stable facts (the
    /// proposal's time, a hold's end), so every attempt sends the provider the same request.
    pub expires_at: chrono::DateTime<chrono::Utc>,
    /// Why no new charge may be created now (a deposit whose hold ended), if so. Checked only
    /// after the lookup that follows an unknown outcome: a charge that exists at the provider
    /// is recorded whatever the rules say now, then closed without telling anyone, so the
    /// withdrawal sweep cancels it there.
    pub refusal: Option<ToolFailure>,
}

fn not_possible(text: ActionText<'_>) -> ToolFailure {
    let message = action_text(text).unwrap_or_else(|e| e.to_string());
    ToolFailure::Permanent { message, details: json!({ "reason": "not_possible" }) }
}

pub(super) fn gateway_failure(e: GatewayError) -> ToolFailure {
    match e {
        GatewayError::Unknown(reason) => ToolFailure::Unknown(reason),
        GatewayError::WindowClosed => ToolFailure::Transient(GatewayError::WindowClosed.to_string()),
        // The merchant must fix the credentials: said plainly, and kept (not retried blindly).
        GatewayError::Unauthorized(reason) => ToolFailure::Permanent {
            message: format!("the Pix provider refused the credentials; check the [pix] settings: {reason}"),
            details: json!({ "reason": "provider_refused" }),
        },
        other => ToolFailure::Permanent {
            message: format!("the Pix provider refused the charge: {other}"),
            details: json!({ "reason": "provider_refused" }),
        },
    }
}

/// Creates the charge (at most once for the call's key), records it with the customer's
/// messages and settles the call, all in the atomic phase.
pub async fn create_charge(
    store: &Store,
    replier: &Replier,
    gateways: &Gateways,
    call: &ToolCall<'_>,
    order: ChargeOrder<'_>,
) -> Result<Value, ToolFailure> {
    let ctx = call.ctx;
    let tenant = ctx.tenant;
    let (Some(key), Some(attempt)) = (call.key, call.attempt) else {
        return Err(ToolFailure::Transient("charges run through the ledger".into()));
    };
    let Some(config) = tenant.settings.pix.as_ref() else { return Err(not_possible(ActionText::PixNotConfigured)) };
    let settings = PixSettings::from_raw(config.clone()).map_err(|_| not_possible(ActionText::PixNotConfigured))?;
    if attempt.previous.is_some()
        && let Some(charge) = store.charge_by_key(tenant.id, key).await.map_err(ToolFailure::storage)?
    {
        return Ok(charge.to_json()); // recorded by an attempt that died before settling
    }

    let customer =
        store.conversation_for_phone(tenant.id, order.customer_phone, ctx.now).await.map_err(ToolFailure::storage)?;
    let contact = store.conversation_contact(tenant.id, customer).await.map_err(ToolFailure::storage)?;
    let last = store.last_inbound_at(tenant.id, customer).await.map_err(ToolFailure::storage)?;
    if let Some(given) = order.payer_document.filter(|d| contact.payer_document.as_ref() != Some(*d)) {
        store.set_payer_document(tenant.id, contact.contact_id, given, ctx.now).await.map_err(ToolFailure::storage)?;
    }
    let document = order.payer_document.or(contact.payer_document.as_ref()).cloned();

    let request = ChargeRequest {
        key: key.clone(),
        txid: Txid::for_static(key),
        amount: order.amount,
        description: order.description.to_owned(),
        expires_at: order.expires_at,
        payer: Payer { phone: order.customer_phone.clone(), name: contact.profile_name.clone(), document },
        window: call.window.clone(),
    };
    let gateway = gateways.for_tenant(tenant.id, &settings).map_err(gateway_failure)?;
    // Taken over from a worker that may still be sending (frozen past its lease, or an earlier
    // attempt of this turn): a provider that does not deduplicate would take its create and
    // ours, so its create gets time to land before the lookup below can see it.
    if let (Some(until), Some(lands)) = (attempt.predecessor_sends_until, gateway.late_create_window()) {
        tokio::time::sleep_until((until + lands).into()).await;
    }
    // After an unknown outcome (or an attempt that died mid-call) the provider may hold the
    // charge already: look it up before creating, and before any rule that would stop a new
    // one, so a charge that exists is never left unrecorded.
    let looked_up = match attempt.previous {
        Some(LedgerState::OutcomeUnknown | LedgerState::Running) => {
            gateway.find(&request).await.map_err(gateway_failure)?
        }
        _ => None,
    };
    let refused = order.refusal.is_some();
    // Found, but no longer wanted (the deposit's hold ended): recorded, told to nobody, and
    // closed, so the withdrawal sweep cancels it at the provider.
    let via = if refused { None } else { choose_via(tenant, last, ctx.now) };
    let created = match looked_up {
        Some(found) => found,
        None => {
            if let Some(refusal) = order.refusal {
                return Err(refusal);
            }
            if settings.gateway.requires_payer_document() && request.payer.document.is_none() {
                return Err(payer_document_required());
            }
            if via.is_none() {
                return Err(not_possible(ActionText::OutsideWindow));
            }
            gateway.create(&request).await.map_err(gateway_failure)?
        }
    };
    // A code that does not decode would reach the customer as a broken payment.
    let code = crate::pix::decode(&created.copia_e_cola).map_err(|e| ToolFailure::Permanent {
        message: format!("the Pix provider returned an invalid code: {e}"),
        details: json!({ "reason": "invalid_code" }),
    })?;
    for warning in code.warnings() {
        tracing::warn!(gateway = gateway.name(), %warning, "the Pix provider's code is accepted with a warning");
    }

    let destination = Destination {
        tenant: tenant.id,
        conversation: customer,
        recipient: crate::whatsapp::Recipient { wa_id: contact.wa_id.clone(), user_id: contact.user_id.clone() },
        local: replier.is_local(tenant),
    };
    let new = NewCharge {
        tenant: tenant.id,
        action: order.action,
        appointment: order.appointment,
        key,
        txid: created.txid.as_str(),
        gateway: gateway.name(),
        provider_ref: created.provider_ref.as_deref(),
        amount: order.amount,
        description: order.description,
        customer_phone: order.customer_phone,
        customer_conversation: customer,
        merchant_conversation: order.merchant_conversation,
        copia_e_cola: &created.copia_e_cola,
        // Found after an unknown outcome but unable to reach the customer now (the window
        // closed meanwhile, no template): recorded without messages; the console shows it.
        delivery: via.unwrap_or(ChargeVia::Text).as_str(),
        // A provider may stretch a short expiry (Mercado Pago's minimum): the customer is told
        // the caller's deadline, which a deposit's hold sets.
        expires_at: created.expires_at.min(order.expires_at),
    };
    let messages =
        |charge: &Charge| via.map(|via| customer_messages(tenant, charge, via, &destination)).unwrap_or_default();
    let render = |charge: &Charge| charge.to_json();
    let now = store.db_time(Utc::now());
    match store.record_charge(&new, attempt.fence, &messages, &render, now).await.map_err(ToolFailure::storage)? {
        Some(charge) if refused => {
            tracing::warn!(tenant = %tenant.id, charge = charge.id, "a charge found after an unknown outcome is no longer wanted; closing it");
            store.close_charge(tenant.id, charge.id, "expired", now).await.map_err(ToolFailure::storage)?;
            Ok(charge.to_json())
        }
        Some(charge) => {
            replier.wake();
            Ok(charge.to_json())
        }
        None => Err(ToolFailure::Transient("another attempt took this call over".into())),
    }
}

/// The refusal of a charge whose gateway needs the payer's CPF or CNPJ when none is known.
pub fn payer_document_required() -> ToolFailure {
    let message = action_text(ActionText::PayerDocumentRequired).unwrap_or_else(|e| e.to_string());
    ToolFailure::refused(message, json!({ "reason": PAYER_DOCUMENT_REQUIRED }))
}
