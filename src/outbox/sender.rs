//! Sends outbox rows through the Graph API, one claimed row at a time.

use std::sync::Arc;

use anyhow::Context;
use chrono::{DateTime, Utc};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::config::{OutboxConfig, QueueConfig};
use crate::domain::Secret;
use crate::jobs::{Backoff, to_delta};
use crate::metrics::Metrics;
use crate::outbox::ClaimedOutbound;
use crate::store::{OutboxStore, RescheduleAs, Store, TenantStore};
use crate::whatsapp::{GraphClient, SendError};

/// What one `send_next` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendOutcome {
    Empty,
    Sent {
        wamid: String,
    },
    WillRetry,
    Unknown,
    Failed {
        reason: String,
    },
    /// Another sender took the row over (our claim went stale); nothing was recorded.
    Superseded,
}

#[derive(Clone)]
pub struct OutboxSender {
    store: Store,
    client: GraphClient,
    default_token: Option<Secret>,
    config: OutboxConfig,
    backoff: Backoff,
    metrics: Metrics,
    notify: Arc<Notify>,
    /// Local mode (decided at start): claim and send nothing, not even rows queued for sending
    /// by an earlier run outside local mode.
    local_mode: bool,
}

impl OutboxSender {
    // `local_mode` stays a required argument rather than a builder option defaulting to
    // "may send", so no caller can forget it.
    #[expect(clippy::too_many_arguments, reason = "every part is required; see above")]
    pub fn new(
        store: Store,
        client: GraphClient,
        default_token: Option<Secret>,
        config: OutboxConfig,
        queue: &QueueConfig,
        metrics: Metrics,
        notify: Arc<Notify>,
        local_mode: bool,
    ) -> Self {
        let backoff = Backoff { base: queue.backoff_base, max: queue.backoff_max };
        Self { store, client, default_token, config, backoff, metrics, notify, local_mode }
    }

    /// Claims and sends one due row.
    pub async fn send_next(&self) -> anyhow::Result<SendOutcome> {
        self.send_next_at(Utc::now()).await
    }

    /// `send_next` as if the clock read `now` (for tests of the grace period).
    pub async fn send_next_at(&self, now: DateTime<Utc>) -> anyhow::Result<SendOutcome> {
        if self.local_mode {
            return Ok(SendOutcome::Empty);
        }
        let grace_until = now + to_delta(self.config.grace);
        let Some(claimed) =
            self.store.claim_outbound(now, grace_until).await.context("failed to claim an outbox row")?
        else {
            return Ok(SendOutcome::Empty);
        };
        let span = tracing::info_span!("outbox_send", tenant = %claimed.tenant, outbound = %claimed.id, key = %claimed.key, attempt = claimed.attempt);
        self.deliver(claimed, now, grace_until).instrument(span).await
    }

    async fn deliver(
        &self,
        claimed: ClaimedOutbound,
        now: DateTime<Utc>,
        grace_until: DateTime<Utc>,
    ) -> anyhow::Result<SendOutcome> {
        let tenant = self
            .store
            .tenant(claimed.tenant)
            .await
            .context("failed to load the tenant of an outbox row")?
            .context("outbox row of a deleted tenant")?;
        let Some(token) = tenant.access_token.as_ref().or(self.default_token.as_ref()) else {
            let reason = "no WhatsApp access token for this tenant".to_owned();
            self.store.mark_outbound_failed(&claimed, &reason, now).await?;
            self.metrics.outbox_failed.inc();
            return Ok(SendOutcome::Failed { reason });
        };

        let result = self
            .client
            .send(&tenant.phone_number_id, token, &claimed.recipient, &claimed.message.0, &claimed.key)
            .await;
        let exhausted = claimed.attempt >= i64::from(self.config.max_attempts);
        let outcome = match result {
            Ok(wamid) => {
                self.store.mark_sent(claimed.tenant, claimed.id, &wamid, now).await?;
                self.metrics.outbox_sent.inc();
                tracing::info!(%wamid, "sent");
                return Ok(SendOutcome::Sent { wamid });
            }
            Err(SendError::Retry { reason, retry_after }) if !exhausted => {
                let delay = self.backoff.delay(claimed.attempt as u32).max(retry_after.unwrap_or_default());
                let ok = self
                    .store
                    .reschedule_outbound(&claimed, RescheduleAs::Pending, &reason, now + to_delta(delay), now)
                    .await?;
                self.metrics.outbox_retried.inc();
                tracing::warn!(%reason, ?delay, "send failed, will retry");
                (ok, SendOutcome::WillRetry)
            }
            Err(SendError::Unknown { reason }) if !exhausted => {
                // Maybe sent: wait for a status webhook carrying our key before resending.
                let ok =
                    self.store.reschedule_outbound(&claimed, RescheduleAs::Unknown, &reason, grace_until, now).await?;
                self.metrics.outbox_retried.inc();
                tracing::warn!(%reason, "send outcome unknown, waiting for a status webhook");
                (ok, SendOutcome::Unknown)
            }
            Err(error) => {
                let reason = if exhausted {
                    format!("gave up after {} attempts: {error}", claimed.attempt)
                } else {
                    error.to_string()
                };
                let ok = self.store.mark_outbound_failed(&claimed, &reason, now).await?;
                self.metrics.outbox_failed.inc();
                tracing::error!(%reason, "send failed permanently");
                (ok, SendOutcome::Failed { reason })
            }
        };
        Ok(if outcome.0 { outcome.1 } else { SendOutcome::Superseded })
    }

    /// Sends until `shutdown`; wakes on `notify` or every `poll`.
    pub async fn run(self, poll: std::time::Duration, shutdown: CancellationToken) {
        while !shutdown.is_cancelled() {
            match self.send_next().await {
                Ok(SendOutcome::Empty) => {}
                Ok(_) => continue,
                Err(e) => tracing::error!(error = format!("{e:#}"), "outbox sender step failed"),
            }
            tokio::select! {
                () = self.notify.notified() => {}
                () = tokio::time::sleep(poll) => {}
                () = shutdown.cancelled() => {}
            }
        }
    }
}
