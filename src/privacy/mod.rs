//! LGPD: the merchant's export and erasure of a customer's data (the console's contact page), and
//! the texts of the opt-out (`crate::turns::OptOut` handles "sair" and "voltar").
//!
//! **Opt-out** ([`crate::turns::OptOut`]). A customer (never staff) whose message is exactly "sair" or "parar"
//! (ignoring case, accents and surrounding spaces or punctuation) is opted out and told once how
//! to come back; "voltar" from an opted-out customer opts back in. The write and the reply are
//! one transaction under the turn's job lease, the reply keyed by the turn, so a rerun of the
//! turn answers once. An opted-out customer still talks with the bot normally; what stops is
//! everything queued for them *outside* a conversation turn:
//! - reminders (the sweep skips them, and an opt-out withdraws a reminder still unsent);
//! - the expiry notices of pending actions and of deposit holds.
//!
//! Kept on purpose, because they are transactional answers to something the customer or the
//! merchant did, not marketing: a merchant's explicit Pix charge (the merchant confirmed it with
//! a button, and the customer owes it), a booking deposit's charge and every "paid" notice, the
//! answers of the console's cancel/move (the customer must know their appointment changed).
//!
//! **Export** ([`crate::store::PrivacyStore::export_contact`]): the contact, its messages in and
//! out, appointments, charges and pending actions, scoped by tenant.
//!
//! **Erasure** ([`erase`]), one transaction, idempotent (a second one changes nothing):
//! - erased: the contact's name, username, `wa_id` and user id (its key becomes
//!   `erased:{id}`, unique and identifying no one; `erased_at` is set, and it counts as opted
//!   out); inbound message bodies (`NULL`) and raw payloads; outbound message contents and
//!   recipients (replaced by a placeholder; status and timestamps kept); the model's history
//!   rows of the conversation (deleted) and the guided menu's state; the arguments and results
//!   of the customer's ledger rows; the offer texts of the conversation's pending actions; the
//!   merchant's charge proposals about this customer's number (payload, subject, offer text,
//!   result, and their ledger rows); the description and number on the customer's charges.
//! - cancelled: unsent messages to the contact (`cancelled`, never sent), its turns not yet
//!   started, and its pending actions (`expired`).
//! - kept: appointments (service, professional, times, price, status) and charges (amount,
//!   status, txid, dates): the business's books need them, and without the contact's data
//!   they identify no one; payment events (provider ids and amounts only); model call metrics.
//!   What staff typed in their own conversation is the merchant's record and is not searched.
//!
//! A customer who writes again after an erasure is a new contact with a new conversation.

use askama::Template;
use chrono::{DateTime, Utc};

use crate::domain::ContactId;
use crate::messages::render;
use crate::store::{ErasureStore, Redactions, Store};
use crate::tenant::Tenant;
use crate::whatsapp::OutboundMessage;

/// Every text about privacy, to the customer and in place of erased data.
#[derive(Template)]
#[template(path = "messages/privacy.txt")]
pub struct Privacy<'a> {
    pub text: PrivacyText<'a>,
}

pub enum PrivacyText<'a> {
    OptedOut {
        business: &'a str,
    },
    OptedIn {
        business: &'a str,
    },
    /// What is left where personal data was.
    Erased,
}

/// The pt-BR text of a privacy message.
pub fn privacy_text(text: PrivacyText<'_>) -> anyhow::Result<String> {
    render(&Privacy { text })
}

/// Anonymizes `contact` of `tenant` (see the module docs). `Ok(false)` when it was erased
/// before; `StoreError::NotFound` when the tenant has no such contact.
pub async fn erase(store: &Store, tenant: &Tenant, contact: ContactId, now: DateTime<Utc>) -> anyhow::Result<bool> {
    let text = privacy_text(PrivacyText::Erased)?;
    let redactions = Redactions { message: OutboundMessage::text(text.clone())?, text };
    let erased = store.erase_contact(tenant.id, contact, &redactions, now).await?;
    if erased {
        tracing::info!(tenant = %tenant.id, contact = contact.0, "contact erased");
    }
    Ok(erased)
}
