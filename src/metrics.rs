//! Prometheus counters for the pipeline, served at `/metrics`.

use std::sync::Arc;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::registry::Registry;

/// Cheap to clone; every clone counts into the same registry.
#[derive(Clone)]
pub struct Metrics {
    inner: Arc<Inner>,
}

pub struct Inner {
    registry: Registry,
    pub inbound_received: Counter,
    pub inbound_duplicate: Counter,
    pub webhook_signature_rejected: Counter,
    pub inbound_unknown_tenant: Counter,
    pub webhook_parse_errors: Counter,
    pub statuses_applied: Counter,
    pub jobs_claimed: Counter,
    pub jobs_completed: Counter,
    pub jobs_retried: Counter,
    pub jobs_dead: Counter,
    pub jobs_lease_lost: Counter,
    pub outbox_sent: Counter,
    pub outbox_failed: Counter,
    pub outbox_retried: Counter,
}

impl std::ops::Deref for Metrics {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.inner
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("balcao");
        let mut counter = |name: &str, help: &str| {
            let c = Counter::default();
            registry.register(name, help, c.clone());
            c
        };
        let inbound_received = counter("inbound_received", "Inbound WhatsApp messages stored");
        let inbound_duplicate = counter("inbound_duplicate", "Inbound messages already stored (redelivered)");
        let webhook_signature_rejected =
            counter("webhook_signature_rejected", "Webhook POSTs rejected for a missing or wrong signature");
        let inbound_unknown_tenant =
            counter("inbound_unknown_tenant", "Webhook changes for a phone_number_id no tenant owns");
        let webhook_parse_errors = counter("webhook_parse_errors", "Webhook elements that failed to parse");
        let statuses_applied = counter("statuses_applied", "Status webhooks that updated an outbox row");
        let jobs_claimed = counter("jobs_claimed", "Turn jobs claimed by a worker");
        let jobs_completed = counter("jobs_completed", "Turn jobs completed");
        let jobs_retried = counter("jobs_retried", "Turn jobs scheduled for another attempt");
        let jobs_dead = counter("jobs_dead", "Turn jobs that ran out of attempts");
        let jobs_lease_lost = counter("jobs_lease_lost", "Turns abandoned because their lease was lost");
        let outbox_sent = counter("outbox_sent", "Outbound messages accepted by WhatsApp");
        let outbox_failed = counter("outbox_failed", "Outbound messages that failed permanently");
        let outbox_retried = counter("outbox_retried", "Outbound send attempts to be retried");
        Self {
            inner: Arc::new(Inner {
                registry,
                inbound_received,
                inbound_duplicate,
                webhook_signature_rejected,
                inbound_unknown_tenant,
                webhook_parse_errors,
                statuses_applied,
                jobs_claimed,
                jobs_completed,
                jobs_retried,
                jobs_dead,
                jobs_lease_lost,
                outbox_sent,
                outbox_failed,
                outbox_retried,
            }),
        }
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = encode(&mut out, &self.inner.registry);
        out
    }
}
