//! The "paid" path: the sandbox's "marcar como pago" and, next, the providers' notifications
//! end here.

use anyhow::Context;
use chrono::Utc;

use super::Charge;
use super::delivery::Destination;
use crate::domain::ConversationId;
use crate::messages::{ActionText, ChargeVia, action_text};
use crate::outbox::{NewOutbound, Replier};
use crate::store::{ChargeStore, InboundStore, Store};
use crate::tenant::Tenant;
use crate::whatsapp::{OutboundMessage, Recipient};

#[derive(Debug, Clone)]
pub enum PaidOutcome {
    /// This call moved the charge to paid and queued both notices.
    Paid(Box<Charge>),
    /// It was not pending (already paid, expired, cancelled): nothing changed.
    Unchanged(Box<Charge>),
    NotFound,
}

async fn destination(
    store: &Store,
    replier: &Replier,
    tenant: &Tenant,
    conversation: i64,
) -> anyhow::Result<Destination> {
    let conversation = ConversationId(conversation);
    let contact = store.conversation_contact(tenant.id, conversation).await?;
    Ok(Destination {
        tenant: tenant.id,
        conversation,
        recipient: Recipient { wa_id: contact.wa_id, user_id: contact.user_id },
        local: replier.is_local(tenant),
    })
}

fn notices(charge: &Charge, customer: &Destination, merchant: &Destination) -> anyhow::Result<Vec<NewOutbound>> {
    let amount = charge.amount().to_string();
    let key = |part: &str| format!("charge:{}:{part}", charge.txid);
    let mut out = Vec::new();
    let to_customer = action_text(ActionText::PaidCustomer { amount: &amount, description: &charge.description })?;
    out.extend(customer.message(key("paid"), OutboundMessage::text(to_customer.clone())?));
    if ChargeVia::parse(&charge.delivery) == ChargeVia::Order {
        let status = OutboundMessage::OrderStatus {
            reference_id: charge.id.to_string(),
            status: "completed".into(),
            body: to_customer,
        };
        out.extend(customer.message(key("order_status"), status));
    }
    let to_merchant = action_text(ActionText::PaidMerchant {
        amount: &amount,
        customer: &charge.customer_phone,
        description: &charge.description,
    })?;
    out.extend(merchant.message(key("paid_merchant"), OutboundMessage::text(to_merchant)?));
    Ok(out)
}

/// Marks charge `id` paid once and tells the customer and the merchant once each, however
/// often it is called (a redelivered notification, a double click on "marcar como pago").
pub async fn mark_paid(store: &Store, replier: &Replier, tenant: &Tenant, id: i64) -> anyhow::Result<PaidOutcome> {
    let Some(charge) = store.charge(tenant.id, id).await? else { return Ok(PaidOutcome::NotFound) };
    if charge.status != "pending" {
        return Ok(PaidOutcome::Unchanged(Box::new(charge)));
    }
    let customer = destination(store, replier, tenant, charge.customer_conversation_id).await?;
    let merchant = destination(store, replier, tenant, charge.merchant_conversation_id).await?;
    let built = notices(&charge, &customer, &merchant).context("failed to build the payment notices")?;
    // The notices depend only on fields a payment does not change, so those built from the
    // read above are the ones the conditional update commits with.
    let paid = store.mark_charge_paid(tenant.id, id, &|_| built.clone(), store.db_time(Utc::now())).await?;
    Ok(match paid {
        Some(charge) => {
            tracing::info!(tenant = %tenant.id, charge = charge.id, "charge paid");
            replier.wake();
            PaidOutcome::Paid(Box::new(charge))
        }
        None => match store.charge(tenant.id, id).await? {
            Some(charge) => PaidOutcome::Unchanged(Box::new(charge)),
            None => PaidOutcome::NotFound,
        },
    })
}
