//! The messages that carry a charge to its customer, chosen by the 24-hour window.

use chrono::{DateTime, TimeDelta, Utc};

use super::Charge;
use crate::messages::{ActionText, ChargeVia, DepositText, action_text, deposit_text, when_at};
use crate::store::{Destination, NewOutbound};
use crate::tenant::Tenant;
use crate::whatsapp::OutboundMessage;

/// Meta's customer service window: free-form messages only this long after the customer's
/// last message.
pub const SERVICE_WINDOW: TimeDelta = TimeDelta::hours(24);
/// Sending happens a little after choosing (the outbox, retries): a window about to close is
/// treated as closed.
const SEND_MARGIN: TimeDelta = TimeDelta::minutes(15);

/// Whether a free-form message chosen at `now` still reaches someone who last wrote at `last`.
pub fn inside_window(last: Option<DateTime<Utc>>, now: DateTime<Utc>) -> bool {
    last.is_some_and(|at| now - at < SERVICE_WINDOW - SEND_MARGIN)
}

/// How the charge can reach the customer now; `None` when it cannot (outside the window
/// without a template).
pub fn choose_via(tenant: &Tenant, last_inbound: Option<DateTime<Utc>>, now: DateTime<Utc>) -> Option<ChargeVia> {
    match (inside_window(last_inbound, now), tenant.settings.payments, &tenant.settings.charge_template) {
        (true, true, _) => Some(ChargeVia::Order),
        (true, false, _) => Some(ChargeVia::Text),
        (false, _, Some(_)) => Some(ChargeVia::Template),
        (false, _, None) => None,
    }
}

/// The customer's messages for `charge`, keyed by its txid so a re-run inserts nothing.
/// A message that cannot be built (a template that breaks a limit) is logged and skipped;
/// the charge and its code stay visible to the merchant.
pub fn customer_messages(tenant: &Tenant, charge: &Charge, via: ChargeVia, to: &Destination) -> Vec<NewOutbound> {
    let amount = charge.amount().to_string();
    let key = |part: &str| format!("charge:{}:{part}", charge.txid);
    // A deposit says what paying it does and by when.
    let intro = || match charge.appointment_id {
        Some(_) => deposit_text(DepositText::ChargeToCustomer {
            business: &tenant.name,
            amount: &amount,
            description: &charge.description,
            until: &when_at(tenant.timezone, charge.expires_at),
        }),
        None => action_text(ActionText::ChargeToCustomer {
            business: &tenant.name,
            amount: &amount,
            description: &charge.description,
        }),
    };
    let built: anyhow::Result<Vec<(String, OutboundMessage)>> = (|| {
        Ok(match via {
            ChargeVia::Text => vec![
                (key("text"), OutboundMessage::text(intro()?)?),
                (key("code"), OutboundMessage::text(charge.copia_e_cola.clone())?),
                (
                    key("qr"),
                    OutboundMessage::QrImage {
                        payload: charge.copia_e_cola.clone(),
                        caption: Some(action_text(ActionText::QrCaption { amount: &amount })?),
                    },
                ),
            ],
            ChargeVia::Order => {
                let pix = tenant.settings.pix.as_ref().ok_or_else(|| anyhow::anyhow!("no [pix] settings"))?;
                let body = intro()?;
                vec![(
                    key("order"),
                    OutboundMessage::OrderDetails {
                        reference_id: charge.id.to_string(),
                        body: body.clone(),
                        footer: None,
                        amount: charge.amount(),
                        description: charge.description.clone(),
                        copia_e_cola: charge.copia_e_cola.clone(),
                        merchant_name: pix.merchant_name.clone(),
                        pix_key: pix.key.clone(),
                        key_type: pix.key_type.to_ascii_uppercase(),
                        fallback: format!("{body}\n\n{}", charge.copia_e_cola),
                    },
                )]
            }
            ChargeVia::Template => {
                let template =
                    tenant.settings.charge_template.as_ref().ok_or_else(|| anyhow::anyhow!("no charge template"))?;
                vec![(
                    key("template"),
                    OutboundMessage::Template {
                        name: template.name.clone(),
                        language: template.language.clone(),
                        body_params: vec![amount.clone(), charge.description.clone(), charge.copia_e_cola.clone()],
                        quick_replies: Vec::new(),
                    },
                )]
            }
        })
    })();
    match built {
        Ok(messages) => messages
            .into_iter()
            .filter(|(_, m)| match m.validate() {
                Ok(()) => true,
                Err(e) => {
                    tracing::error!(charge = charge.id, error = %e, "a charge message breaks WhatsApp's limits");
                    false
                }
            })
            .filter_map(|(key, message)| to.message(key, message))
            .collect(),
        Err(e) => {
            tracing::error!(charge = charge.id, error = %e, "cannot build the charge's messages");
            Vec::new()
        }
    }
}
