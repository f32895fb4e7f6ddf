//! Prometheus metrics for the pipeline, served at `/metrics`: counters, latency histograms
//! (seconds) and the queue gauges, which the handler sets from the store at each scrape.
//!
//! Labels stay bounded: providers, stop reasons and tool outcomes are fixed sets, and tool
//! names come from the code. Nothing is labelled per tenant or per customer.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::llm::StopReason;

/// Latency buckets from 1 ms: 16 doublings reach ~33 s, past the slowest model call or send
/// we wait for.
const FIRST_BUCKET_SECONDS: f64 = 0.001;
const BUCKET_FACTOR: f64 = 2.0;
const BUCKETS: u16 = 16;

fn seconds_histogram() -> Histogram {
    Histogram::new(exponential_buckets(FIRST_BUCKET_SECONDS, BUCKET_FACTOR, BUCKETS))
}

/// Labels of a model call.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ModelCallLabels {
    /// `anthropic` or `openai`.
    pub provider: &'static str,
    /// See [`stop_label`]; `error` when the call failed.
    pub stop_reason: &'static str,
}

/// Labels of a tool execution.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ToolLabels {
    /// The tool's name, from its spec in the code.
    pub tool: &'static str,
    /// See `ledger::Outcome::label`; `error` when the store failed.
    pub outcome: &'static str,
}

/// A stop reason as a bounded label: a reason we do not know is `other`, whatever its text.
pub fn stop_label(stop: &StopReason) -> &'static str {
    match stop {
        StopReason::EndTurn => "end_turn",
        StopReason::ToolUse => "tool_use",
        StopReason::MaxTokens => "max_tokens",
        StopReason::Refusal => "refusal",
        StopReason::Other(_) => "other",
    }
}

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
    pub webhook_seconds: Histogram,
    pub turn_seconds: Histogram,
    pub model_call_seconds: Family<ModelCallLabels, Histogram>,
    pub tool_seconds: Family<ToolLabels, Histogram>,
    pub outbox_send_seconds: Histogram,
    /// Writes per intake commit (group commit); 1 for every write when it is off.
    pub intake_batch_size: Histogram,
    /// Intake batches whose transaction failed, each write then retried alone.
    pub intake_batches_split: Counter,
    /// Jobs available or retryable and due; set at each scrape.
    pub queue_depth: Gauge,
    /// How long the oldest runnable job has been due, 0 when none; set at each scrape.
    pub queue_oldest_seconds: Gauge<f64, AtomicU64>,
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
        let intake_batches_split =
            counter("intake_batches_split", "Intake batches that failed and were retried one write at a time");
        let mut histogram = |name: &str, help: &str| {
            let h = seconds_histogram();
            registry.register(name, help, h.clone());
            h
        };
        let webhook_seconds = histogram("webhook_seconds", "Time to handle a webhook POST");
        let turn_seconds = histogram("turn_seconds", "Time to run a claimed job to an outcome");
        let outbox_send_seconds = histogram("outbox_send_seconds", "Time of one send attempt to the Graph API");
        // Batch sizes in doublings up to the largest batch the settings allow.
        let intake_batch_size = Histogram::new(exponential_buckets(1.0, 2.0, 11));
        registry.register("intake_batch_size", "Webhook writes committed together", intake_batch_size.clone());
        let model_call_seconds =
            Family::<ModelCallLabels, Histogram>::new_with_constructor(seconds_histogram as fn() -> Histogram);
        registry.register(
            "model_call_seconds",
            "Model call latency by provider and stop reason",
            model_call_seconds.clone(),
        );
        let tool_seconds =
            Family::<ToolLabels, Histogram>::new_with_constructor(seconds_histogram as fn() -> Histogram);
        registry.register("tool_seconds", "Tool execution time by tool and outcome", tool_seconds.clone());
        let queue_depth = Gauge::default();
        registry.register("queue_depth", "Jobs available or retryable and due", queue_depth.clone());
        let queue_oldest_seconds = Gauge::<f64, AtomicU64>::default();
        registry.register(
            "queue_oldest_seconds",
            "Seconds since the oldest runnable job became due (0 when none)",
            queue_oldest_seconds.clone(),
        );
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
                webhook_seconds,
                turn_seconds,
                model_call_seconds,
                tool_seconds,
                outbox_send_seconds,
                intake_batch_size,
                intake_batches_split,
                queue_depth,
                queue_oldest_seconds,
            }),
        }
    }

    /// Records a model call that took `elapsed`.
    pub fn observe_model_call(&self, provider: &'static str, stop_reason: &'static str, elapsed: Duration) {
        self.model_call_seconds
            .get_or_create(&ModelCallLabels { provider, stop_reason })
            .observe(elapsed.as_secs_f64());
    }

    /// Records a tool execution that took `elapsed`.
    pub fn observe_tool(&self, tool: &'static str, outcome: &'static str, elapsed: Duration) {
        self.tool_seconds.get_or_create(&ToolLabels { tool, outcome }).observe(elapsed.as_secs_f64());
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = encode(&mut out, &self.inner.registry);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_and_gauges_are_encoded_with_buckets_and_labels() {
        let metrics = Metrics::new();
        metrics.webhook_seconds.observe(0.004);
        metrics.turn_seconds.observe(1.5);
        metrics.outbox_send_seconds.observe(0.2);
        metrics.observe_model_call("anthropic", stop_label(&StopReason::ToolUse), Duration::from_millis(800));
        metrics.observe_model_call("openai", stop_label(&StopReason::Other("weird".into())), Duration::from_secs(2));
        metrics.observe_tool("book_appointment", "executed", Duration::from_millis(30));
        metrics.queue_depth.set(3);
        metrics.queue_oldest_seconds.set(12.5);

        let text = metrics.render();
        assert!(text.contains("# TYPE balcao_webhook_seconds histogram"), "{text}");
        assert!(text.contains("balcao_webhook_seconds_bucket{le=\"0.001\"} 0"), "{text}");
        assert!(text.contains("balcao_webhook_seconds_bucket{le=\"0.008\"} 1"), "{text}");
        assert!(text.contains("balcao_webhook_seconds_bucket{le=\"+Inf\"} 1"), "{text}");
        assert!(text.contains("balcao_webhook_seconds_count 1"), "{text}");
        assert!(text.contains("balcao_turn_seconds_count 1"), "{text}");
        assert!(text.contains("balcao_outbox_send_seconds_count 1"), "{text}");
        assert!(
            text.contains("balcao_model_call_seconds_count{provider=\"anthropic\",stop_reason=\"tool_use\"} 1"),
            "{text}"
        );
        // An unknown stop reason never becomes a label value of its own.
        assert!(text.contains("provider=\"openai\",stop_reason=\"other\""), "{text}");
        assert!(!text.contains("weird"), "{text}");
        assert!(
            text.contains("balcao_tool_seconds_bucket{le=\"0.032\",tool=\"book_appointment\",outcome=\"executed\"} 1"),
            "{text}"
        );
        assert!(text.contains("balcao_queue_depth 3"), "{text}");
        assert!(text.contains("balcao_queue_oldest_seconds 12.5"), "{text}");
    }
}
