//! Pix charges per second end to end through the sandbox gateway: signed click webhook →
//! click job → conditional confirm → ledger → charge recorded with the customer's messages in
//! the outbox. SQLite and PostgreSQL, 8 workers (8 units of work at once: a click's statements
//! run on one connection, `store::unit`), 8 staff members clicking.
//!
//! Before the clock: a quarter as many clicks again (the warm-up), then `ANALYZE`. Commits per
//! click come from the database's own count of write transactions over the timed clicks
//! (`common::commits`), the intake's included.
//!
//! `cargo bench --bench charges`; set `BALCAO_BENCH_POSTGRES_URL` to add PostgreSQL.

#[path = "common/mod.rs"]
mod common;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use balcao::actions::ActionPayload;
use balcao::app::App;
use balcao::config::Config;
use balcao::domain::{ActionId, Cents, ClickId, DatabaseUrl, Decision, PhoneE164};
use balcao::store::{ActionStore, ChargeStore, NewAction, Store, TenantStore};
use balcao::tenant::TenantSpec;
use balcao::whatsapp::ContactIdentity;
use futures::StreamExt;
use serde_json::json;

const CHARGES: usize = 400;
const STAFF: usize = 8;
/// Clicks before the clock starts.
const WARM_UP: usize = CHARGES / 4;

fn identity(phone: &PhoneE164) -> ContactIdentity {
    ContactIdentity { wa_id: Some(phone.clone()), user_id: None, username: None, profile_name: None }
}

/// One run: its table row, its charges per second and its commits per click.
async fn run(name: &str, url: &str) -> (String, f64, f64) {
    let store = Store::connect(&DatabaseUrl::new(url), 16).await.expect("connect");
    store.migrate().await.expect("migrate");
    let mut spec = TenantSpec::parse(
        &std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tenants/example.toml")).expect("example"),
    )
    .expect("spec");
    let staff: Vec<PhoneE164> =
        (0..STAFF).map(|i| PhoneE164::parse(&format!("+55119880000{i:02}")).expect("phone")).collect();
    spec.staff.extend(staff.iter().cloned());
    let tenant = store.apply_tenant(&spec, chrono::Utc::now()).await.expect("tenant").id();
    let now = chrono::Utc::now();
    // Proposals made beforehand: the bench measures the click and the charge, not the form.
    let mut clicks = Vec::new();
    for i in 0..WARM_UP + CHARGES {
        let member = &staff[i % STAFF];
        let conversation = store.ensure_conversation(tenant, &identity(member), now).await.expect("conversation");
        let payload = ActionPayload::Charge {
            customer_phone: PhoneE164::parse(&format!("+55119{i:08}")).expect("phone"),
            amount: Cents(5000),
            description: format!("Corte {i}"),
            payer_document: None,
        };
        let id = ActionId::random();
        let action = NewAction {
            id,
            tenant,
            conversation,
            payload: &payload,
            expires_at: now + chrono::TimeDelta::hours(1),
            offer_text: "Enviar?",
            proposed_by: None,
            offer: None,
            settle: None,
        };
        store.propose_action(&action, now).await.expect("propose");
        clicks.push((member.clone(), ClickId::new(id, Decision::Confirm).id()));
    }
    let vars: HashMap<String, String> = [
        ("BALCAO_ADDR", "127.0.0.1:0"),
        ("WHATSAPP_APP_SECRET", common::SECRET),
        ("BALCAO_POLL_INTERVAL_MS", "5"),
        ("BALCAO_WORKERS", "8"),
        ("RUST_LOG", "warn"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    let config = Config::from_vars(&vars).expect("config");
    let app = App::build(config, store.clone()).await.expect("app");
    let base = format!("http://{}", app.local_addr().expect("addr"));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(app.run_until_stopped(async move {
        let _ = stopped.await;
    }));
    let http = reqwest::Client::new();
    let since = now - chrono::TimeDelta::hours(1);
    let clicked = |from: usize, to: usize| {
        let (http, base, phone_number_id, store, clicks) = (&http, &base, &spec.phone_number_id, &store, &clicks);
        async move {
            let started = Instant::now();
            // Posted from 32 connections, so the intake keeps ahead of the workers.
            let post = |(i, (member, click)): (usize, &(PhoneE164, String))| {
                let (from, click) = (member.digits().to_owned(), click.clone());
                async move {
                    let body = serde_json::to_vec(&json!({
                    "object": "whatsapp_business_account",
                    "entry": [{ "id": "1", "changes": [{ "field": "messages", "value": {
                        "metadata": { "phone_number_id": phone_number_id },
                        "contacts": [{ "profile": { "name": "Zé" }, "wa_id": from }],
                        "messages": [{ "from": from, "id": format!("wamid.click.{i}"), "timestamp": "1", "type": "interactive",
                                       "interactive": { "type": "button_reply", "button_reply": { "id": click, "title": "Confirmar" } } }]
                    }}]}]
                }))
                .expect("json");
                    let signature = balcao::whatsapp::signature::sign(common::SECRET.as_bytes(), &body);
                    common::post(http, base, &(body, signature)).await;
                }
            };
            let posts = clicks.iter().enumerate().take(to).skip(from).map(post);
            futures::stream::iter(posts).buffer_unordered(32).collect::<Vec<()>>().await;
            loop {
                let done = store.charges(tenant, None, since, to as i64 + 1).await.expect("charges").len();
                if done >= to {
                    break;
                }
                assert!(started.elapsed() < Duration::from_secs(600), "stuck at {done} charges");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let elapsed = started.elapsed();
            // Every commit of the clicks counts: a click may still be writing after its charge.
            common::jobs_finished(url).await;
            elapsed
        }
    };
    clicked(0, WARM_UP).await;
    common::analyze(url).await;
    let commits_before = common::commits(&store, url).await;
    let elapsed = clicked(WARM_UP, WARM_UP + CHARGES).await;
    // The probe's own transaction id is not the clicks' (PostgreSQL; SQLite's probe is free).
    let probe = if store.sqlite_commits().is_some() { 0 } else { 1 };
    let committed = common::commits(&store, url).await - commits_before - probe;
    let _ = stop.send(());
    let _ = server.await;
    let rate = CHARGES as f64 / elapsed.as_secs_f64();
    let per_click = committed as f64 / CHARGES as f64;
    let row = format!(
        "| {name} | {CHARGES} | {rate:.1} | {:.1} | {per_click:.2} |\n",
        elapsed.as_secs_f64() * 1000.0 / CHARGES as f64,
    );
    (row, rate, per_click)
}

#[tokio::main]
async fn main() {
    let mut table = String::from(
        "| backend | charges | charges/s | ms per charge (wall) | commits per click |\n|---|---|---|---|---|\n",
    );
    let dir = tempfile::tempdir().expect("dir");
    let (row, rate, per_click) = run("SQLite", &format!("sqlite://{}/charges.db", dir.path().display())).await;
    table += &row;
    let mut ratio =
        format!("\nratio | commits per click (SQLite), at {rate:.0} charges/s | {per_click:.2} | target ≤ 4\n");
    if let Ok(server) = std::env::var("BALCAO_BENCH_POSTGRES_URL") {
        let admin = sqlx::PgPool::connect(&server).await.expect("postgres");
        let db = "balcao_bench_charges";
        let url = common::fresh_database(&admin, &server, db).await;
        let (row, rate, per_click) = run("PostgreSQL", &url).await;
        table += &row;
        ratio +=
            &format!("ratio | commits per click (PostgreSQL), at {rate:.0} charges/s | {per_click:.2} | target ≤ 4\n");
        common::drop_database(&admin, db).await;
    } else {
        eprintln!("PostgreSQL skipped: set BALCAO_BENCH_POSTGRES_URL to include it");
    }
    println!("\n{table}{ratio}");
}
