//! The "paid" path: the sandbox's "marcar como pago" and, next, the providers' notifications
//! end here. A booking deposit's payment goes on in `crate::money::deposits`, which also confirms
//! (or, too late, cannot confirm) its appointment.

use anyhow::Context;
use chrono::Utc;

use super::Charge;
use crate::domain::ConversationId;
use crate::jobs::Replier;
use crate::messages::{ActionText, ChargeVia, action_text};
use crate::store::{ChargeStore, Destination, NewOutbound, RefundStore, Store, TenantStore};
use crate::tenant::Tenant;
use crate::whatsapp::OutboundMessage;

#[derive(Debug, Clone)]
pub enum PaidOutcome {
    /// This call moved the charge to paid and queued both notices.
    Paid(Box<Charge>),
    /// It was not pending (already paid, expired, cancelled): nothing changed.
    Unchanged(Box<Charge>),
    /// A booking deposit paid when its appointment could no longer be confirmed: recorded as
    /// `refund_due`, the merchant told to give it back.
    RefundDue(Box<Charge>),
    NotFound,
}

/// Who speaks for the business about `charge`: the merchant who confirmed it, or (a booking
/// deposit, which nobody confirmed) every staff member.
pub(crate) async fn merchants(
    store: &Store,
    replier: &Replier,
    tenant: &Tenant,
    charge: &Charge,
) -> anyhow::Result<Vec<Destination>> {
    if let Some(conversation) = charge.merchant_conversation_id {
        return Ok(vec![replier.destination(tenant, ConversationId(conversation)).await?]);
    }
    let mut out = Vec::new();
    for phone in store.staff(tenant.id).await? {
        let conversation = store.conversation_for_phone(tenant.id, &phone, store.db_time(Utc::now())).await?;
        out.push(replier.destination(tenant, conversation).await?);
    }
    Ok(out)
}

fn notices(charge: &Charge, customer: &Destination, merchants: &[Destination]) -> anyhow::Result<Vec<NewOutbound>> {
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
    for merchant in merchants {
        out.extend(merchant.message(
            key(&format!("paid_merchant:{}", merchant.conversation)),
            OutboundMessage::text(to_merchant.clone())?,
        ));
    }
    Ok(out)
}

/// Marks charge `id` paid once and tells the customer and the merchant once each, however
/// often it is called (a redelivered notification, a double click on "marcar como pago").
pub async fn mark_paid(
    store: &Store,
    replier: &Replier,
    tenant: &Tenant,
    id: i64,
    end_to_end_id: Option<&str>,
) -> anyhow::Result<PaidOutcome> {
    let Some(charge) = store.charge(tenant.id, id).await? else { return Ok(PaidOutcome::NotFound) };
    if charge.appointment_id.is_some() {
        return crate::money::deposits::mark_deposit_paid(store, replier, tenant, charge, end_to_end_id).await;
    }
    if charge.status != "pending" {
        return Ok(PaidOutcome::Unchanged(Box::new(charge)));
    }
    let customer = replier.destination(tenant, ConversationId(charge.customer_conversation_id)).await?;
    let merchants = merchants(store, replier, tenant, &charge).await?;
    let built = notices(&charge, &customer, &merchants).context("failed to build the payment notices")?;
    // The notices depend only on fields a payment does not change, so those built from the
    // read above are the ones the conditional update commits with.
    let now = store.db_time(Utc::now());
    let paid = store.mark_charge_paid(tenant.id, id, end_to_end_id, &|_| built.clone(), now).await?;
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

/// A payment the provider reports for charge `id`, whatever its state here: [`mark_paid`], and
/// when the charge was no longer pending (expired, cancelled) it becomes `refund_due` (its
/// refund is then offered to the staff with buttons) and the merchant is told once
/// ([`alert_late_payment`]).
pub async fn take_payment(
    store: &Store,
    replier: &Replier,
    tenant: &Tenant,
    id: i64,
    end_to_end_id: Option<&str>,
) -> anyhow::Result<PaidOutcome> {
    let outcome = mark_paid(store, replier, tenant, id, end_to_end_id).await?;
    if let PaidOutcome::Unchanged(now) = &outcome
        && matches!(now.status.as_str(), "expired" | "cancelled" | "refund_due")
    {
        let at = store.db_time(Utc::now());
        store.mark_refund_due(tenant.id, id, end_to_end_id, at).await?;
        alert_late_payment(store, replier, tenant, now).await?;
    }
    Ok(outcome)
}

/// A payment the provider confirmed for a charge that is no longer pending here (expired or
/// cancelled): recorded by the caller, and the merchant told once to check and refund. The
/// outbox key is the one a deposit's refund notice takes, so a redelivered payment of a
/// `refund_due` deposit tells nobody twice.
pub async fn alert_late_payment(
    store: &Store,
    replier: &Replier,
    tenant: &Tenant,
    charge: &Charge,
) -> anyhow::Result<()> {
    let text = action_text(ActionText::LatePayment {
        number: charge.id,
        amount: &charge.amount().to_string(),
        customer: &charge.customer_phone,
    })?;
    for merchant in merchants(store, replier, tenant, charge).await? {
        let key = late_payment_key(charge, merchant.conversation);
        if let Some(message) = merchant.message(key, OutboundMessage::text(text.clone())?) {
            use crate::store::OutboxStore;
            if store.enqueue_outbound(&message, store.db_time(Utc::now())).await?.is_some() {
                replier.wake();
            }
        }
    }
    tracing::warn!(tenant = %tenant.id, charge = charge.id, status = %charge.status, "payment for a charge no longer pending");
    Ok(())
}

/// The outbox key of the merchant's "check and refund" notice about `charge`.
pub(crate) fn late_payment_key(charge: &Charge, merchant: ConversationId) -> String {
    format!("charge:{}:late_payment:{merchant}", charge.txid)
}
