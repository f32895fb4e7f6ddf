//! Offering a refund to the staff: the refund action with its Confirmar/Cancelar buttons, sent
//! to whoever speaks for the charge (the merchant who made it, or every staff member for a
//! deposit). Used by the console and, once per charge, for every charge paid too late (the
//! claim of `charges.refund_offered_at` and the actions commit together, so a sweep that dies
//! halfway offers it again, and two sweeps offer it once). The refund itself is in
//! `crate::money::refunds`.

use chrono::{DateTime, Utc};

use super::{ActionKind, ActionPayload, offer_message, time_to_live};
use crate::domain::{ActionId, Cents};
use crate::jobs::Replier;
use crate::messages::{RefundText, refund_text};
use crate::money::charges::{Charge, merchants};
use crate::store::{ActionStore, NewAction, Store};
use crate::tenant::Tenant;

/// What the staff are asked about refunding `amount` of `charge`; `due` when it was paid too late.
pub fn refund_offer_text(charge: &Charge, amount: Cents, due: bool) -> anyhow::Result<String> {
    let (number, amount) = (charge.id, amount.to_string());
    let (customer, description) = (charge.customer_phone.as_str(), charge.description.as_str());
    refund_text(if due {
        RefundText::OfferDue { number, amount: &amount, customer, description }
    } else {
        RefundText::Offer { number, amount: &amount, customer, description }
    })
}

/// Offers the staff the refund of `amount` of `charge`; a `due` offer (paid too late) is made
/// once per charge, whoever calls. Returns to how many conversations it went.
pub async fn offer_refund(
    store: &Store,
    replier: &Replier,
    tenant: &Tenant,
    charge: &Charge,
    amount: Cents,
    due: bool,
    now: DateTime<Utc>,
) -> anyhow::Result<usize> {
    let text = refund_offer_text(charge, amount, due)?;
    let payload =
        ActionPayload::Refund { charge_id: charge.id, amount, offer: Some(uuid::Uuid::new_v4().simple().to_string()) };
    let expires_at = now + time_to_live(ActionKind::Refund);
    let mut offers = Vec::new();
    for to in merchants(store, replier, tenant, charge).await? {
        let id = ActionId::random();
        let message = offer_message(id, ActionKind::Refund, &text)?;
        let offer = to
            .message(format!("action:{}:offer", id.0.simple()), message)
            .ok_or_else(|| anyhow::anyhow!("bad outbox key"))?;
        offers.push((id, to.conversation, offer));
    }
    let actions: Vec<NewAction<'_>> = offers
        .iter()
        .map(|(id, conversation, offer)| NewAction {
            id: *id,
            tenant: tenant.id,
            conversation: *conversation,
            payload: &payload,
            expires_at,
            offer_text: &text,
            proposed_by: None,
            offer: Some(offer),
            settle: None,
        })
        .collect();
    if actions.is_empty() {
        tracing::warn!(tenant = %tenant.id, charge = charge.id, "no staff number to offer a refund to ([whatsapp] staff)");
    }
    let offered = if due {
        // Claimed even with nobody to ask, so the sweep does not come back to it every round.
        if store.record_refund_offer(tenant.id, charge.id, &actions, now).await? { actions.len() } else { 0 }
    } else {
        for action in &actions {
            store.propose_action(action, now).await?;
        }
        actions.len()
    };
    if offered > 0 {
        tracing::info!(tenant = %tenant.id, charge = charge.id, staff = offered, due, "refund offered");
        replier.wake();
    }
    Ok(offered)
}
