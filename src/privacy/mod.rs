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
//! **Erasure** ([`erase`]), one transaction, idempotent (a second one scrubs the customer's
//! conversation again, tells no one and keeps the first one's tombstone):
//! - erased on the customer's side: the contact's name, username, `wa_id`, user id and CPF/CNPJ
//!   (its key becomes `erased:{id}`, unique and identifying no one; `erased_at` is set, and it
//!   counts as opted out); inbound message bodies and raw payloads; outbound message contents
//!   and recipients (a placeholder; status and timestamps kept); the model's history of the
//!   conversation (deleted) and the guided menu's state; the arguments and results of their
//!   ledger rows; their pending actions' texts; their charges' descriptions and numbers.
//! - erased on the merchant's side, found by content (`crate::domain::Needles`: the number
//!   however typed, with or without the ninth digit, the name, the CPF, the charges'
//!   descriptions as typed whole): staff messages in and out, the merchant agent's history,
//!   ledger arguments and results, offer texts, error texts, refund reasons; the merchant's
//!   charge proposals about the number (payload, subject, offer text, result, ledger rows).
//! - never stored as ids: raw WhatsApp message ids, which embed the number. Every id column,
//!   job, action and log line holds a keyed hash ([`crate::domain::PrivacyKey`]); the raw id is
//!   only inside the message's raw payload, erased above.
//! - cancelled: unsent messages to the contact (`cancelled`, never sent), its turns not yet
//!   started, its pending actions (`expired`), and actions confirmed but not yet run
//!   (`cancelled`: they would run on placeholders), whose deciders are told.
//! - remembered: a tombstone, the keyed hashes of the contact's identities and the erasure's
//!   time. A redelivery of a message sent before it is dropped at the intake; a message sent
//!   after it starts a new, empty contact. A message racing the erasure is admitted in its
//!   write's transaction under a share lock on the contact's row (`store::tx::admit_in_tx`): it
//!   lands before the erasure and is erased with it, or after it, dropped or a new contact's.
//! - kept: appointments (service, professional, times, price, status) and charges (amount,
//!   status, txid, dates): the business's books need them, and without the contact's data
//!   they identify no one; payment events (provider ids and amounts only); refunds (an amount
//!   back to the account that paid); model call metrics.

use anyhow::Context;
use askama::Template;
use chrono::{DateTime, Utc};

use crate::domain::{Cents, ContactId, PrivacyKey};
use crate::jobs::Replier;
use crate::messages::{render, when_at};
use crate::store::{Cancelled, CancelledAction, ErasureStore, OutboxStore, Redactions, Store, TenantStore};
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
    /// To the staff member who confirmed a charge whose customer was erased before it ran.
    ChargeCancelled {
        amount: Cents,
    },
    /// To the staff, for a customer's confirmed booking or move that never ran.
    BookingCancelled {
        when: String,
    },
    /// To the staff, for another confirmed action of the customer's that never ran.
    ActionCancelled,
}

/// The pt-BR text of a privacy message.
pub fn privacy_text(text: PrivacyText<'_>) -> anyhow::Result<String> {
    render(&Privacy { text })
}

/// Anonymizes `contact` of `tenant` (see the module docs) and tells the staff of the actions
/// it cancelled. `Ok(false)` when it was erased before (its conversation is scrubbed again);
/// `StoreError::NotFound` when the tenant has no such contact.
pub async fn erase(
    store: &Store,
    replier: &Replier,
    key: &PrivacyKey,
    tenant: &Tenant,
    contact: ContactId,
    now: DateTime<Utc>,
) -> anyhow::Result<bool> {
    let text = privacy_text(PrivacyText::Erased)?;
    let redactions = Redactions { message: OutboundMessage::text(text.clone())?, text };
    let Some(cancelled) = store.erase_contact(tenant.id, contact, &redactions, key, now).await? else {
        return Ok(false);
    };
    tracing::info!(tenant = %tenant.id, contact = contact.0, cancelled = cancelled.len(), "contact erased");
    tell_staff(store, replier, tenant, &cancelled, now)
        .await
        .context("failed to tell the staff of cancelled actions")?;
    Ok(true)
}

/// How long after an erasure its conversation is watched for writes that raced it.
const RACE_WATCH: chrono::TimeDelta = chrono::TimeDelta::hours(1);

/// Erases again every contact erased within [`RACE_WATCH`] whose conversation a write reached
/// after the erasure's scrub (one that had read the contact before the erasure and committed
/// after it: a sweep's notice, an effect's offer). The sender never sends such a row (its
/// claim skips erased conversations), and this clears it; returns how many were scrubbed.
pub async fn scrub_raced_writes(store: &Store, key: &PrivacyKey, now: DateTime<Utc>) -> anyhow::Result<usize> {
    let raced = store.erased_with_late_rows(now - RACE_WATCH).await?;
    if raced.is_empty() {
        return Ok(0);
    }
    let text = privacy_text(PrivacyText::Erased)?;
    let redactions = Redactions { message: OutboundMessage::text(text.clone())?, text };
    for (tenant, contact) in &raced {
        store.erase_contact(*tenant, *contact, &redactions, key, now).await?;
        tracing::info!(%tenant, contact = contact.0, "scrubbed a write that raced an erasure");
    }
    Ok(raced.len())
}

/// [`scrub_raced_writes`] every `every` until `stop`.
pub async fn run_scrub(
    store: Store,
    key: PrivacyKey,
    every: std::time::Duration,
    stop: tokio_util::sync::CancellationToken,
) {
    crate::supervise::periodically("scrubbing writes that raced an erasure", every, stop, || {
        scrub_raced_writes(&store, &key, store.db_time(Utc::now()))
    })
    .await;
}

/// Tells the staff member who confirmed each cancelled charge, and every staff member of a
/// customer's cancelled action; each notice keyed by its action, so it is queued once.
async fn tell_staff(
    store: &Store,
    replier: &Replier,
    tenant: &Tenant,
    cancelled: &[CancelledAction],
    now: DateTime<Utc>,
) -> anyhow::Result<()> {
    let mut queued = false;
    for action in cancelled {
        let (text, recipients) = match &action.what {
            Cancelled::Charge { amount } => {
                (PrivacyText::ChargeCancelled { amount: *amount }, vec![action.conversation])
            }
            other => {
                let text = match other {
                    Cancelled::Booking { starts_at } => {
                        PrivacyText::BookingCancelled { when: when_at(tenant.timezone, *starts_at) }
                    }
                    _ => PrivacyText::ActionCancelled,
                };
                let mut staff = Vec::new();
                for phone in store.staff(tenant.id).await? {
                    staff.push(store.conversation_for_phone(tenant.id, &phone, now).await?);
                }
                (text, staff)
            }
        };
        let message = OutboundMessage::text(privacy_text(text)?)?;
        for conversation in recipients {
            let destination = replier.destination(tenant, conversation).await?;
            if let Some(new) = destination.message(format!("erased:{}:{conversation}", action.id), message.clone()) {
                queued |= store.enqueue_outbound(&new, now).await?.is_some() && !new.local;
            }
        }
    }
    if queued {
        replier.wake();
    }
    Ok(())
}
