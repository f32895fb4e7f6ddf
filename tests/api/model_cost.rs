//! What a booking costs in the model path: model calls, request bytes, and the share of each
//! request before the cache breakpoint (tools and static instructions, which the provider
//! caches across calls). Byte counts, not time: deterministic for the same code and catalog.
//! `cargo test --test api model_cost -- --nocapture` prints the table `BENCHMARKS.md` shows.

use serde_json::{Value, json};

use crate::contract;
use crate::support::agent::{agent_config, slot};
use crate::support::common::TestApp;
use crate::support::fake_model::{FakeModel, says, tool_use};
use crate::support::payloads::{bytes, text_payload};
use crate::support::scenario::Scenario;
use balcao::store::BookingStore;

fn size(v: &Value) -> usize {
    serde_json::to_vec(v).map_or(0, |b| b.len())
}

/// (total, cached prefix, tools, static system, dynamic system, messages) bytes of a request.
fn parts(body: &Value) -> [usize; 6] {
    let system = body["system"].as_array().cloned().unwrap_or_default();
    let tools = size(&body["tools"]);
    let static_system = system.first().map_or(0, size);
    let dynamic_system = system.get(1).map_or(0, size);
    [size(body), tools + static_system, tools, static_system, dynamic_system, size(&body["messages"])]
}

contract!(a_booking_through_the_model_costs_four_calls_mostly_cached, |db| async move {
    let at = slot();
    let fake = FakeModel::start(vec![]).await;
    let s = Scenario::new(db).await;
    let app = TestApp::spawn(db, agent_config(&fake, &[])).await;
    let date = &at[..10];
    // Turn 1: the customer asks; the model checks the day and offers times.
    fake.push(tool_use(&[("toolu_1", "check_availability", json!({ "service_id": s.corte, "date": date }))]));
    fake.push(says("Tenho 14h com o Zé ou 15h com o Rafa. Qual prefere?"));
    let asked = text_payload("wamid.cost1", "5511999990001", "Oi! Quero cortar o cabelo, tem horário?");
    assert_eq!(app.post_webhook(&bytes(&asked)).await.status(), 200);
    app.drain_turns().await;
    // Turn 2: the customer picks; the model books and confirms.
    fake.push(tool_use(&[(
        "toolu_2",
        "create_booking",
        json!({ "service_id": s.corte, "professional_id": s.ze, "starts_at": at }),
    )]));
    fake.push(says("Pronto! Corte marcado com o Zé."));
    let chose = text_payload("wamid.cost2", "5511999990001", "14h com o Zé, por favor");
    assert_eq!(app.post_webhook(&bytes(&chose)).await.status(), 200);
    app.drain_turns().await;
    assert_eq!(db.store.count_active_appointments(s.tenant.id).await.unwrap(), 1);

    let requests = fake.requests();
    assert_eq!(requests.len(), 4, "two turns, a tool call and an answer each");
    // The second turn does not resend the first turn's free times (stale by then).
    let history = requests[2].1["messages"].to_string();
    assert!(history.contains("no longer current") && !history.contains(&at[..16]), "{history}");
    let mut table = String::from(
        "| call | request bytes | before the cache breakpoint | share | tools | static system | per-turn system | messages |\n\
         |---|---|---|---|---|---|---|---|\n",
    );
    let mut totals = [0usize; 2];
    for (n, (_, body)) in requests.iter().enumerate() {
        let [total, cached, tools, static_system, dynamic_system, messages] = parts(body);
        totals[0] += total;
        totals[1] += cached;
        table += &format!(
            "| {} | {total} | {cached} | {:.0}% | {tools} | {static_system} | {dynamic_system} | {messages} |\n",
            n + 1,
            cached as f64 * 100.0 / total as f64
        );
        // The cache breakpoint sits on the static block, and that block is the same on every
        // call: otherwise the provider would cache nothing.
        assert_eq!(body["system"][0]["cache_control"]["type"], "ephemeral");
        assert_eq!(body["system"][0], requests[0].1["system"][0], "call {} changed the cached prefix", n + 1);
        assert_eq!(body["tools"], requests[0].1["tools"]);
    }
    table += &format!(
        "| booking | {} | {} | {:.0}% | | | | |\n",
        totals[0],
        totals[1],
        totals[1] as f64 * 100.0 / totals[0] as f64
    );
    eprintln!("\nmodel cost of one booking ({}):\n{table}", db.store.backend());
});
