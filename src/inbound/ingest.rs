//! One authentic webhook body → stored messages, turn jobs and outbox status updates.

use chrono::Utc;
use serde_json::Value;

use super::NewInbound;
use crate::actions::ClickId;
use crate::jobs::{JobKind, TurnTiming};
use crate::metrics::Metrics;
use crate::store::{InboundStore, OutboxStore, Recorded, Store, StoreError};
use crate::tenant::{Tenant, TenantDirectory};
use crate::whatsapp::webhook::{StatusUpdate, parse_batch};

/// What a body contained and what became of it.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct IngestReport {
    pub stored: usize,
    pub duplicates: usize,
    pub statuses: usize,
    pub unknown_tenants: usize,
    pub parse_errors: usize,
    /// Elements that could not be stored because the database failed. The caller must ask
    /// Meta to redeliver: stored siblings are deduplicated then, so nothing is lost or doubled.
    pub storage_failures: usize,
}

/// Processes every element of `body`; one failure never drops its siblings.
pub async fn ingest(
    store: &Store,
    tenants: &TenantDirectory,
    metrics: &Metrics,
    timing: &TurnTiming,
    body: &Value,
) -> IngestReport {
    let batch = parse_batch(body);
    let mut report = IngestReport { parse_errors: batch.errors.len(), ..Default::default() };
    for error in &batch.errors {
        metrics.webhook_parse_errors.inc();
        tracing::warn!(%error, "skipped a malformed webhook element");
    }
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
        for message in &change.messages {
            match record(store, &tenant, message, timing).await {
                Ok(Recorded::New { .. }) => {
                    metrics.inbound_received.inc();
                    report.stored += 1;
                }
                Ok(Recorded::Duplicate) => {
                    metrics.inbound_duplicate.inc();
                    report.duplicates += 1;
                }
                Err(e) => {
                    report.storage_failures += 1;
                    tracing::error!(tenant = %tenant.id, wamid = %message.provider_message_id, error = %e, "failed to store an inbound message");
                }
            }
        }
        for status in &change.statuses {
            match apply(store, &tenant, status).await {
                Ok(true) => {
                    metrics.statuses_applied.inc();
                    report.statuses += 1;
                }
                Ok(false) => {}
                Err(e) => {
                    report.storage_failures += 1;
                    tracing::error!(tenant = %tenant.id, wamid = %status.provider_message_id, error = %e, "failed to apply a status");
                }
            }
        }
    }
    report
}

async fn record(
    store: &Store,
    tenant: &Tenant,
    message: &NewInbound,
    timing: &TurnTiming,
) -> Result<Recorded, StoreError> {
    // A click on a pending action's button is answered on its own, without the model.
    let kind = match message.content.reply_id().and_then(ClickId::parse) {
        Some(_) => JobKind::Click,
        None => JobKind::Turn,
    };
    let recorded = store.record_inbound(tenant.id, message, kind, timing, Utc::now()).await?;
    if let Recorded::New { conversation, job } = recorded {
        tracing::info!(
            tenant = %tenant.id, %conversation, %job, wamid = %message.provider_message_id,
            kind = message.content.kind(), "inbound message stored"
        );
    }
    Ok(recorded)
}

async fn apply(store: &Store, tenant: &Tenant, status: &StatusUpdate) -> Result<bool, StoreError> {
    let applied = store.apply_status(tenant.id, status, Utc::now()).await?;
    tracing::debug!(tenant = %tenant.id, wamid = %status.provider_message_id, status = status.status.as_str(), applied, "status webhook");
    Ok(applied)
}
