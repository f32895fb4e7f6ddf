//! Sends outbox rows through the Graph API, one claimed row at a time.
//!
//! Two kinds take more than one request, all within one claim:
//! - a Pix QR code is rendered to a PNG, uploaded (`/media`) and sent as an image. Rendering is
//!   deterministic and an upload is not a message, so a retried row simply renders and uploads
//!   again; a payload that cannot be rendered fails the row permanently;
//! - an `order_details` message that Meta refuses for good (a 4xx other than the 24-hour window,
//!   e.g. a number not enabled for payments) is followed by its plain-text fallback under the
//!   same row and key, and the row's `last_error` says that it fell back.

use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use chrono::{DateTime, Utc};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::config::{OutboxConfig, QueueConfig};
use crate::domain::{Backoff, PrivacyKey, Secret, to_delta};
use crate::metrics::Metrics;
use crate::store::{ClaimedOutbound, OutboxStore, RescheduleAs, Store, TenantStore};
use crate::whatsapp::client::OUTSIDE_WINDOW_CODE;
use crate::whatsapp::webhook::{DeliveryStatus, StatusUpdate};
use crate::whatsapp::{GraphClient, OutboundMessage, SendError, UploadedImage};

/// The media type of a rendered QR code.
const QR_MIME: &str = "image/png";

/// A message Meta accepted.
struct Accepted {
    wamid: String,
    /// Why the plain-text fallback went out instead of the stored message.
    fell_back: Option<String>,
}

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
    /// Hashes the wamid Meta answers with before it is stored or logged.
    privacy_key: PrivacyKey,
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
        privacy_key: PrivacyKey,
    ) -> Self {
        let backoff = Backoff { base: queue.backoff_base, max: queue.backoff_max };
        Self { store, client, default_token, config, backoff, metrics, notify, local_mode, privacy_key }
    }

    /// Claims and sends one due row.
    pub async fn send_next(&self) -> anyhow::Result<SendOutcome> {
        self.send_next_at(Utc::now()).await
    }

    /// `send_next` as if the clock read `now` (for tests of the grace period). The claim and
    /// what the send records are one unit of work: one connection on PostgreSQL.
    pub async fn send_next_at(&self, now: DateTime<Utc>) -> anyhow::Result<SendOutcome> {
        self.store.unit(self.claim_and_send(now)).await
    }

    async fn claim_and_send(&self, now: DateTime<Utc>) -> anyhow::Result<SendOutcome> {
        if self.local_mode {
            return Ok(SendOutcome::Empty);
        }
        // On the database's clock, the one rows are stamped with (a turn's replies are due at
        // its end's `written_at`): on this server's clock, a reply written an instant ago
        // could look due only later by the clocks' difference (or the error in measuring it).
        let now = self.store.db_time(now);
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

        let started = Instant::now();
        let result = self.attempt(&tenant.phone_number_id, token, &claimed).await;
        self.metrics.outbox_send_seconds.observe(started.elapsed().as_secs_f64());
        let exhausted = claimed.attempt >= i64::from(self.config.max_attempts);
        let result = result.map(|a| Accepted { wamid: self.privacy_key.message_id(&a.wamid), ..a });
        let outcome = match result {
            Ok(Accepted { wamid, fell_back: None }) => {
                self.store.mark_sent(claimed.tenant, claimed.id, &wamid, now).await?;
                self.metrics.outbox_sent.inc();
                tracing::info!(%wamid, "sent");
                return Ok(SendOutcome::Sent { wamid });
            }
            Ok(Accepted { wamid, fell_back: Some(note) }) => {
                // `mark_sent` clears `last_error`; the status path records the same move to
                // `sent` (forward only, wamid kept if one is there) and keeps the note.
                let update = StatusUpdate {
                    provider_message_id: wamid.clone(),
                    status: DeliveryStatus::Sent,
                    callback_key: Some(claimed.key.clone()),
                    error: Some(note.clone()),
                };
                if !self.store.apply_status(claimed.tenant, &update, now).await? {
                    self.store.mark_sent(claimed.tenant, claimed.id, &wamid, now).await?;
                }
                self.metrics.outbox_sent.inc();
                tracing::warn!(%wamid, %note, "sent the plain-text fallback");
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

    /// One attempt at a row: every request its kind needs, classified as one result.
    async fn attempt(
        &self,
        phone_number_id: &str,
        token: &Secret,
        claimed: &ClaimedOutbound,
    ) -> Result<Accepted, SendError> {
        let (to, key) = (&claimed.recipient, claimed.key.as_str());
        let accepted = |wamid| Accepted { wamid, fell_back: None };
        match &claimed.message.0 {
            qr @ OutboundMessage::QrImage { payload, caption } => {
                qr.validate()?;
                let png = crate::pix::qr::png(payload).map_err(|e| SendError::Permanent {
                    code: None,
                    reason: format!("failed to render the Pix QR code: {e}"),
                })?;
                let media_id = self.client.upload_media(phone_number_id, token, png, QR_MIME).await?;
                let image = UploadedImage { media_id, caption: caption.clone() };
                self.client.send_image(phone_number_id, token, to, &image, key).await.map(accepted)
            }
            order @ OutboundMessage::OrderDetails { fallback, .. } => {
                match self.client.send(phone_number_id, token, to, order, key).await {
                    // Outside the window the text would be refused too.
                    Err(SendError::Permanent { code, reason }) if code != Some(OUTSIDE_WINDOW_CODE) => {
                        tracing::warn!(%reason, "order_details refused, sending the plain-text fallback");
                        let refused = format!("order_details refused ({reason})");
                        let text = OutboundMessage::Text { body: fallback.clone() };
                        match self.client.send(phone_number_id, token, to, &text, key).await {
                            Ok(wamid) => Ok(Accepted {
                                wamid,
                                fell_back: Some(format!("{refused}; sent the plain-text fallback instead")),
                            }),
                            Err(e) => Err(e.context(&format!("{refused}; the plain-text fallback"))),
                        }
                    }
                    other => other.map(accepted),
                }
            }
            message => self.client.send(phone_number_id, token, to, message, key).await.map(accepted),
        }
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
