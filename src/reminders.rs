//! Reminders before confirmed appointments, with buttons: "Confirmo" records that the
//! customer will come, "Preciso cancelar" offers the cancellation. Both are an `attendance`
//! pending action, so the click path handles them like any other button.
//!
//! Invariants:
//! - one reminder per appointment, start and offset (`reminders` primary key), recorded in the
//!   same transaction as its action and message: however many servers sweep, once;
//! - none for an appointment booked less than the offset ahead, cancelled, still held for its
//!   deposit or expired (only confirmed ones are read) or moved (the old start's reminder is
//!   never due again; the new start gets its own); a hold confirmed by its deposit after the
//!   reminder was due gets it at the next sweep;
//! - inside the 24-hour window the reminder is an interactive message; outside it, the
//!   tenant's template with quick replies whose payloads name the action; without a template,
//!   such a customer gets none;
//! - none for a customer who opted out ("sair") or was erased: skipped without being recorded,
//!   so "voltar" before it is due brings it back; one queued but unsent when they opted out is
//!   withdrawn by the opt-out itself (`crate::privacy`).

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use tokio_util::sync::CancellationToken;

use crate::actions::{ActionPayload, offer_message};
use crate::domain::{ActionId, ClickId, ContactId, Decision, TenantId};
use crate::jobs::Replier;
use crate::messages::{ActionText, action_text, when_at};
use crate::money::charges::inside_window;
use crate::store::{
    ActionStore, AgendaStore, CatalogStore, ChargeStore, InboundStore, NewAction, PrivacyStore, Store, TenantStore,
};
use crate::tenant::Tenant;
use crate::whatsapp::OutboundMessage;

/// The longest offset any tenant may configure (the tenant file's limit).
const MAX_OFFSET: TimeDelta = TimeDelta::hours(24 * 14);

/// Sends every reminder due at `now`; returns how many were recorded. The store picks the due
/// ones (the tenant's offset is applied in the query), so each sweep reads only what it sends;
/// their tenants are loaded once per sweep. One reminder that fails (a dropped connection, a
/// tenant whose template no longer renders) is logged and left for the next sweep: it never
/// holds back the reminders after it, which are as due as it is.
pub async fn send_due(store: &Store, replier: &Replier, now: DateTime<Utc>) -> anyhow::Result<usize> {
    let mut tenants: HashMap<TenantId, Option<Tenant>> = HashMap::new();
    let (mut sent, mut failed) = (0, 0);
    for (tenant_id, appointment) in store.reminders_due(now, now + MAX_OFFSET).await? {
        let tenant = match tenants.entry(tenant_id) {
            Entry::Occupied(known) => known.into_mut(),
            // A tenant that does not load is tried once per sweep, not once per appointment.
            Entry::Vacant(slot) => slot.insert(store.tenant(tenant_id).await.unwrap_or_else(|e| {
                failed += 1;
                tracing::warn!(tenant = %tenant_id, error = %e, "reminders: tenant not loaded; next sweep");
                None
            })),
        };
        // Gone, or reminders turned off since the query.
        let Some(tenant) = tenant.as_ref().filter(|t| t.settings.reminders.hours_before > 0) else { continue };
        let offset = TimeDelta::hours(i64::from(tenant.settings.reminders.hours_before));
        match remind(store, replier, tenant, &appointment, offset, now).await {
            Ok(true) => sent += 1,
            Ok(false) => {}
            Err(e) => {
                failed += 1;
                tracing::warn!(tenant = %tenant_id, appointment = appointment.id, error = %e, "reminder failed; next sweep");
            }
        }
    }
    if sent > 0 {
        replier.wake();
    }
    if failed > 0 {
        anyhow::bail!("{failed} reminder(s) failed, {sent} sent");
    }
    Ok(sent)
}

async fn remind(
    store: &Store,
    replier: &Replier,
    tenant: &Tenant,
    appointment: &crate::booking::Appointment,
    offset: TimeDelta,
    now: DateTime<Utc>,
) -> anyhow::Result<bool> {
    let record = |action| {
        store.record_reminder(tenant.id, appointment.id, appointment.starts_at, offset.num_minutes(), action, now)
    };
    let Some(conversation) = store.conversation_of_contact(tenant.id, ContactId(appointment.contact_id)).await? else {
        return Ok(record(None).await?);
    };
    // Not recorded: a customer who opts back in before it is due still gets it.
    if store.is_silenced(tenant.id, ContactId(appointment.contact_id)).await? {
        tracing::debug!(tenant = %tenant.id, appointment = appointment.id, "customer opted out; no reminder");
        return Ok(false);
    }
    let (services, _) = store.catalog(tenant.id).await?;
    let service = services.iter().find(|s| s.id == appointment.service_id).map_or("?", |s| s.name.as_str());
    let when = when_at(tenant.timezone, appointment.starts_at);
    let text = action_text(ActionText::OfferAttendance { business: &tenant.name, service, when: &when })?;
    let id = ActionId::random();
    let last = store.last_inbound_at(tenant.id, conversation).await?;
    let message = match (inside_window(last, now), &tenant.settings.reminders.template) {
        (true, _) => offer_message(id, crate::actions::ActionKind::Attendance, &text)?,
        (false, Some(template)) => OutboundMessage::Template {
            name: template.name.clone(),
            language: template.language.clone(),
            body_params: vec![tenant.name.clone(), service.to_owned(), when.clone()],
            quick_replies: vec![ClickId::new(id, Decision::Confirm).id(), ClickId::new(id, Decision::Decline).id()],
        },
        (false, None) => {
            tracing::info!(tenant = %tenant.id, appointment = appointment.id, "no reminder template; customer outside the 24-hour window");
            return Ok(record(None).await?);
        }
    };
    let key = format!("reminder:{}:{}:{}", appointment.id, appointment.starts_at.timestamp(), offset.num_minutes());
    let offer = replier
        .destination(tenant, conversation)
        .await?
        .message(key, message)
        .ok_or_else(|| anyhow::anyhow!("bad outbox key"))?;
    let payload = ActionPayload::Attendance { booking_id: appointment.id };
    let action = NewAction {
        id,
        tenant: tenant.id,
        conversation,
        payload: &payload,
        // The answer matters until the appointment begins.
        expires_at: appointment.starts_at,
        offer_text: &text,
        proposed_by: None,
        offer: Some(&offer),
        settle: None,
    };
    let recorded = record(Some(&action)).await?;
    if recorded {
        tracing::info!(tenant = %tenant.id, appointment = appointment.id, action = %id, "reminder sent");
    }
    Ok(recorded)
}

/// Sweeps every `every` until `stop`.
pub async fn run(store: Store, replier: Replier, every: Duration, stop: CancellationToken) {
    crate::supervise::periodically("sending reminders", every, stop, || {
        send_due(&store, &replier, store.db_time(Utc::now()))
    })
    .await;
}
