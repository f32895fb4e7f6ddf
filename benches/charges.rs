//! Pix charges per second end to end through the sandbox gateway: signed click webhook →
//! click job → conditional confirm → ledger → charge recorded with the customer's messages in
//! the outbox. SQLite and PostgreSQL, 4 workers, 4 staff members clicking.
//!
//! `cargo bench --bench charges`; set `BALCAO_BENCH_POSTGRES_URL` to add PostgreSQL.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use balcao::actions::ActionPayload;
use balcao::app::App;
use balcao::config::Config;
use balcao::domain::{ActionId, Cents, ClickId, DatabaseUrl, Decision, PhoneE164};
use balcao::store::{ActionStore, ChargeStore, NewAction, Store, TenantStore};
use balcao::tenant::TenantSpec;
use balcao::whatsapp::ContactIdentity;
use serde_json::json;

const CHARGES: usize = 400;
const STAFF: usize = 4;
const SECRET: &str = "bench-secret";

fn identity(phone: &PhoneE164) -> ContactIdentity {
    ContactIdentity { wa_id: Some(phone.clone()), user_id: None, username: None, profile_name: None }
}

async fn run(name: &str, url: &str) -> String {
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
    for i in 0..CHARGES {
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
        ("WHATSAPP_APP_SECRET", SECRET),
        ("BALCAO_POLL_INTERVAL_MS", "5"),
        ("BALCAO_WORKERS", "4"),
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
    let started = Instant::now();
    for (i, (member, click)) in clicks.iter().enumerate() {
        let from = member.digits();
        let body = serde_json::to_vec(&json!({
            "object": "whatsapp_business_account",
            "entry": [{ "id": "1", "changes": [{ "field": "messages", "value": {
                "metadata": { "phone_number_id": spec.phone_number_id },
                "contacts": [{ "profile": { "name": "Zé" }, "wa_id": from }],
                "messages": [{ "from": from, "id": format!("wamid.click.{i}"), "timestamp": "1", "type": "interactive",
                               "interactive": { "type": "button_reply", "button_reply": { "id": click, "title": "Confirmar" } } }]
            }}]}]
        }))
        .expect("json");
        let status = http
            .post(format!("{base}/webhooks/whatsapp"))
            .header("x-hub-signature-256", balcao::whatsapp::signature::sign(SECRET.as_bytes(), &body))
            .body(body)
            .send()
            .await
            .expect("post")
            .status();
        assert!(status.is_success());
    }
    let since = now - chrono::TimeDelta::hours(1);
    loop {
        let done = store.charges(tenant, None, since, CHARGES as i64 + 1).await.expect("charges").len();
        if done >= CHARGES {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(600), "stuck at {done} charges");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let elapsed = started.elapsed();
    let _ = stop.send(());
    let _ = server.await;
    format!(
        "| {name} | {CHARGES} | {:.1} | {:.1} |\n",
        CHARGES as f64 / elapsed.as_secs_f64(),
        elapsed.as_secs_f64() * 1000.0 / CHARGES as f64
    )
}

#[tokio::main]
async fn main() {
    let mut table = String::from("| backend | charges | charges/s | ms per charge (wall) |\n|---|---|---|---|\n");
    let dir = tempfile::tempdir().expect("dir");
    table += &run("SQLite", &format!("sqlite://{}/charges.db", dir.path().display())).await;
    if let Ok(server) = std::env::var("BALCAO_BENCH_POSTGRES_URL") {
        let admin = sqlx::PgPool::connect(&server).await.expect("postgres");
        let base = server.rsplit_once('/').map(|(b, _)| b.to_owned()).expect("url with a database");
        let db = "balcao_bench_charges";
        sqlx::query(sqlx::AssertSqlSafe(format!("DROP DATABASE IF EXISTS {db}"))).execute(&admin).await.expect("drop");
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {db}"))).execute(&admin).await.expect("create");
        table += &run("PostgreSQL", &format!("{base}/{db}")).await;
    } else {
        eprintln!("PostgreSQL skipped: set BALCAO_BENCH_POSTGRES_URL to include it");
    }
    println!("\n{table}");
}
