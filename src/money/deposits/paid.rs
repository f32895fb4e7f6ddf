//! A deposit's payment: its appointment confirmed, or (too late) the merchant told to refund.

use anyhow::Context;
use chrono::Utc;

use crate::domain::ConversationId;
use crate::jobs::Replier;
use crate::messages::{ChargeVia, DepositText, deposit_text};
use crate::money::charges::{Charge, PaidOutcome, late_payment_key, merchants};
use crate::store::{BookingStore, ChargeStore, DepositPayment, DepositStore, NewOutbound, Store};
use crate::tenant::Tenant;
use crate::whatsapp::OutboundMessage;

/// Marks deposit `charge` paid once: confirms its appointment if it still can be, otherwise
/// records it `refund_due`; each party is told once, however often a payment is reported.
pub(crate) async fn mark_deposit_paid(
    store: &Store,
    replier: &Replier,
    tenant: &Tenant,
    charge: Charge,
    end_to_end_id: Option<&str>,
) -> anyhow::Result<PaidOutcome> {
    if !matches!(charge.status.as_str(), "pending" | "expired" | "cancelled") {
        return Ok(PaidOutcome::Unchanged(Box::new(charge)));
    }
    let id = charge.appointment_id.context("not a deposit charge")?;
    let appointment = store.appointment(tenant.id, id).await?.context("the deposit's appointment is gone")?;
    let (service, when) = super::describe(store, tenant, &appointment).await?;
    let amount = charge.amount().to_string();
    let customer = replier.destination(tenant, ConversationId(charge.customer_conversation_id)).await?;
    let merchants = merchants(store, replier, tenant, &charge).await?;
    let key = |part: &str| format!("charge:{}:{part}", charge.txid);
    let text = |t: DepositText<'_>| -> anyhow::Result<OutboundMessage> { Ok(OutboundMessage::text(deposit_text(t)?)?) };

    let mut confirmed: Vec<NewOutbound> = Vec::new();
    let to_customer = text(DepositText::PaidCustomer { amount: &amount, service: &service, when: &when })?;
    let body = to_customer.body().to_owned();
    confirmed.extend(customer.message(key("paid"), to_customer));
    if ChargeVia::parse(&charge.delivery) == ChargeVia::Order {
        let status =
            OutboundMessage::OrderStatus { reference_id: charge.id.to_string(), status: "completed".into(), body };
        confirmed.extend(customer.message(key("order_status"), status));
    }
    let to_merchant = text(DepositText::PaidMerchant {
        amount: &amount,
        customer: &charge.customer_phone,
        service: &service,
        when: &when,
    })?;
    for merchant in &merchants {
        let key = key(&format!("paid_merchant:{}", merchant.conversation));
        confirmed.extend(merchant.message(key, to_merchant.clone()));
    }

    let mut refund: Vec<NewOutbound> = Vec::new();
    let to_customer = text(DepositText::RefundCustomer { amount: &amount, service: &service, when: &when })?;
    refund.extend(customer.message(key("refund"), to_customer));
    let to_merchant = text(DepositText::RefundMerchant {
        number: charge.id,
        amount: &amount,
        customer: &charge.customer_phone,
        service: &service,
        when: &when,
    })?;
    for merchant in &merchants {
        refund.extend(merchant.message(late_payment_key(&charge, merchant.conversation), to_merchant.clone()));
    }

    let now = store.db_time(Utc::now());
    Ok(match store.pay_deposit(tenant.id, charge.id, end_to_end_id, &confirmed, &refund, now).await? {
        Some(DepositPayment::Confirmed(paid)) => {
            tracing::info!(tenant = %tenant.id, charge = paid.id, appointment = id, "deposit paid; appointment confirmed");
            replier.wake();
            PaidOutcome::Paid(paid)
        }
        Some(DepositPayment::RefundDue(due)) => {
            tracing::warn!(tenant = %tenant.id, charge = due.id, appointment = id, "deposit paid too late; merchant told to refund");
            replier.wake();
            PaidOutcome::RefundDue(due)
        }
        None => match store.charge(tenant.id, charge.id).await? {
            Some(now) => PaidOutcome::Unchanged(Box::new(now)),
            None => PaidOutcome::NotFound,
        },
    })
}
