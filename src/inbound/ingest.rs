//! One authentic webhook body → stored messages, turn jobs and outbox status updates.

use chrono::Utc;
use serde_json::Value;

use super::group_commit::GroupCommit;
use crate::domain::{ClickId, PrivacyKey, TenantId};
use crate::inbound::TenantDirectory;
use crate::metrics::Metrics;
use crate::store::{
    ConversationRef, Gate, IntakeWrite, JobKind, Recorded, Store, StoreResult, TombstoneStore, Written,
};
use crate::whatsapp::NewInbound;
use crate::whatsapp::webhook::parse_batch;

/// What a body contained and what became of it.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct IngestReport {
    pub stored: usize,
    pub duplicates: usize,
    pub statuses: usize,
    pub unknown_tenants: usize,
    /// Redeliveries of messages sent before their sender's erasure: acknowledged, dropped.
    pub erased: usize,
    pub parse_errors: usize,
    /// Elements that could not be stored because the database failed. The caller must ask
    /// Meta to redeliver: stored siblings are deduplicated then, so nothing is lost or doubled.
    pub storage_failures: usize,
}

/// Processes every element of `body`; one failure never drops its siblings. Writes go through
/// `writer` (group commit), all of the body's at once, and this returns after they committed.
/// Message ids are hashed by `key` as they are parsed ([`PrivacyKey`]); `simulated_by` marks
/// every message of a body the simulator built.
pub async fn ingest(
    store: &Store,
    tenants: &TenantDirectory,
    metrics: &Metrics,
    writer: &GroupCommit,
    key: &PrivacyKey,
    body: &Value,
    simulated_by: Option<&str>,
) -> IngestReport {
    let batch = parse_batch(body, key);
    let mut report = IngestReport { parse_errors: batch.errors.len(), ..Default::default() };
    for error in &batch.errors {
        metrics.webhook_parse_errors.inc();
        tracing::warn!(%error, "skipped a malformed webhook element");
    }
    let mut writes = Vec::new();
    for change in batch.changes {
        let tenant = match tenants.by_phone_number_id(store, &change.phone_number_id).await {
            Ok(Some(tenant)) => tenant,
            Ok(None) => {
                metrics.inbound_unknown_tenant.inc();
                report.unknown_tenants += 1;
                tracing::warn!(phone_number_id = %change.phone_number_id, "webhook for a number no tenant owns");
                continue;
            }
            Err(e) => {
                tracing::error!(error = %e, "tenant lookup failed");
                report.storage_failures += change.messages.len() + change.statuses.len();
                continue;
            }
        };
        for mut message in change.messages {
            message.simulated_by = simulated_by.map(str::to_owned);
            // A read; a new contact is written with its message, in the same commit.
            match store.resolve_conversation(tenant.id, &message.contact).await {
                Ok(conversation) => {
                    // A message that would create or update a contact is checked first: a
                    // duplicate must not bring back what an erasure removed, and neither may a
                    // redelivery of something sent before it. So is a late one, which could
                    // belong to an erased contact whose person has written again since.
                    let late = message.sent_at.is_none_or(|sent| sent < Utc::now() - LATE);
                    if matches!(conversation, ConversationRef::Upsert(_)) || late {
                        match gate(store, tenant.id, &message).await {
                            Ok(Admit::Yes) => {}
                            Ok(Admit::Duplicate) => {
                                metrics.inbound_duplicate.inc();
                                report.duplicates += 1;
                                continue;
                            }
                            Ok(Admit::Erased) => {
                                report.erased += 1;
                                tracing::info!(tenant = %tenant.id, wamid = %message.provider_message_id, "dropped a redelivery from before an erasure");
                                continue;
                            }
                            Err(e) => {
                                report.storage_failures += 1;
                                tracing::error!(tenant = %tenant.id, wamid = %message.provider_message_id, error = %e, "failed to check an inbound message's sender");
                                continue;
                            }
                        }
                    }
                    // A click on a pending action's button is answered on its own, without the model.
                    let kind = match message.content.reply_id().and_then(ClickId::parse) {
                        Some(_) => JobKind::Click,
                        None => JobKind::Turn,
                    };
                    writes.push(IntakeWrite::Message { tenant: tenant.id, conversation, message, kind });
                }
                Err(e) => {
                    report.storage_failures += 1;
                    tracing::error!(tenant = %tenant.id, wamid = %message.provider_message_id, error = %e, "failed to store an inbound message");
                }
            }
        }
        writes.extend(change.statuses.into_iter().map(|update| IntakeWrite::Status { tenant: tenant.id, update }));
    }
    let described: Vec<(TenantId, String, &'static str)> = writes.iter().map(describe).collect();
    let results = writer.write_all(writes).await;
    for ((tenant, id, kind), result) in described.into_iter().zip(results) {
        match result {
            Ok(Written::Message(Recorded::New { conversation, job })) => {
                metrics.inbound_received.inc();
                report.stored += 1;
                tracing::info!(%tenant, %conversation, %job, wamid = %id, kind, "inbound message stored");
            }
            Ok(Written::Message(Recorded::Duplicate)) => {
                metrics.inbound_duplicate.inc();
                report.duplicates += 1;
            }
            Ok(Written::Message(Recorded::Erased)) => {
                report.erased += 1;
                tracing::info!(%tenant, wamid = %id, "dropped a message sent before its sender's erasure");
            }
            Ok(Written::Status(applied)) => {
                tracing::debug!(%tenant, wamid = %id, status = kind, applied, "status webhook");
                if applied {
                    metrics.statuses_applied.inc();
                    report.statuses += 1;
                }
            }
            Err(e) => {
                report.storage_failures += 1;
                tracing::error!(%tenant, wamid = %id, error = %e, "failed to store a webhook element");
            }
        }
    }
    report
}

/// A message sent longer ago than this is checked against erasures even when its contact is
/// known: Meta's redeliveries come minutes to days late, live messages within seconds.
const LATE: chrono::TimeDelta = chrono::TimeDelta::seconds(30);

enum Admit {
    Yes,
    Duplicate,
    Erased,
}

/// Whether a message that would write its contact may: not a duplicate, and not sent before
/// an erasure of its sender (one without a send time is taken as sent before).
async fn gate(store: &Store, tenant: TenantId, message: &NewInbound) -> StoreResult<Admit> {
    Ok(match store.intake_gate(tenant, &message.provider_message_id, &message.sender_hashes).await? {
        Gate::Open => Admit::Yes,
        Gate::Duplicate => Admit::Duplicate,
        Gate::Erased(at) if message.sent_at.is_none_or(|sent| sent <= at) => Admit::Erased,
        Gate::Erased(_) => Admit::Yes,
    })
}

/// What the log says about a write: its tenant, provider id and kind (or status).
fn describe(write: &IntakeWrite) -> (TenantId, String, &'static str) {
    match write {
        IntakeWrite::Message { tenant, message, kind, .. } => {
            (*tenant, message.provider_message_id.clone(), kind.as_str())
        }
        IntakeWrite::Status { tenant, update } => (*tenant, update.provider_message_id.clone(), update.status.as_str()),
    }
}
