//! `/metrics` after real traffic: the webhook and turn histograms count what happened, and
//! the queue gauges are read from the store at each scrape.

use balcao::store::JobStore;
use chrono::{TimeDelta, Utc};

use crate::contract;
use crate::support::common::{TestApp, test_config};
use crate::support::fake_graph::FakeGraph;
use crate::support::payloads::{bytes, text_payload};

/// The value of an unlabelled sample `name` in the exposition `text`.
fn sample(text: &str, name: &str) -> Option<f64> {
    text.lines().find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

contract!(histograms_count_webhooks_and_turns_and_queue_gauges_are_served, |db| async move {
    db.tenant().await;
    let graph = FakeGraph::start().await;
    let app = TestApp::spawn(db, test_config(&graph.url, &[])).await;

    assert_eq!(app.post_webhook(&bytes(&text_payload("wamid.metrics", "16505551234", "oi"))).await.status(), 200);
    // Past the debounce the turn is runnable: the gauges' query sees it.
    let later = Utc::now() + TimeDelta::seconds(60);
    let runnable = db.store.runnable_jobs(later).await.unwrap();
    assert_eq!(runnable.count, 1);
    assert!(runnable.oldest_due.is_some_and(|due| due <= later));

    let turns = app.drain_turns().await;
    assert!(!turns.is_empty());
    let runnable = db.store.runnable_jobs(later).await.unwrap();
    assert_eq!((runnable.count, runnable.oldest_due), (0, None));

    let response = app.get("/metrics").await;
    assert_eq!(response.status(), 200);
    let text = response.text().await.unwrap();
    assert!(text.contains("# TYPE balcao_webhook_seconds histogram"), "{text}");
    assert!(text.contains("balcao_webhook_seconds_bucket{le=\"+Inf\"} 1"), "{text}");
    assert_eq!(sample(&text, "balcao_webhook_seconds_count"), Some(1.0), "{text}");
    assert!(text.contains("# TYPE balcao_turn_seconds histogram"), "{text}");
    assert_eq!(sample(&text, "balcao_turn_seconds_count"), Some(turns.len() as f64), "{text}");
    assert!(text.contains("# TYPE balcao_queue_depth gauge"), "{text}");
    assert!(text.contains("# TYPE balcao_queue_oldest_seconds gauge"), "{text}");
    // Everything ran: nothing is waiting.
    assert_eq!(sample(&text, "balcao_queue_depth"), Some(0.0), "{text}");
    assert_eq!(sample(&text, "balcao_queue_oldest_seconds"), Some(0.0), "{text}");
});
