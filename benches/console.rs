//! Console page latency on a loaded database: 100,000 inbound messages, 10,000 appointments and,
//! per conversation, ten turns with their model calls, ledger rows and replies (seeded in bulk, a
//! few transactions), then the agenda (day and week) and a
//! conversation page rendered through the real router over in-process HTTP with a logged-in
//! session, 50 times each: median and p95 per page and backend, as a markdown table.
//!
//! `cargo bench --bench console`; set `BALCAO_BENCH_POSTGRES_URL` (or
//! `BALCAO_TEST_POSTGRES_URL`) to add PostgreSQL.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use balcao::app::App;
use balcao::config::Config;
use balcao::domain::{DatabaseUrl, PhoneE164};
use balcao::store::{CatalogStore, InboundStore, Store, TenantStore};
use balcao::tenant::TenantSpec;
use balcao::whatsapp::ContactIdentity;
use chrono::{DateTime, Datelike, Days, NaiveTime, TimeDelta, TimeZone, Utc, Weekday};
use sqlx::QueryBuilder;
use sqlx::types::Json;

const MESSAGES: usize = 100_000;
const APPOINTMENTS: usize = 10_000;
const CONTACTS: usize = 1_000;
const RENDERS: usize = 50;
/// Turns per conversation, each with two model calls, two ledger rows and two replies.
const TURNS: i64 = 10;
const CHUNK: usize = 1_000;
const SLUG: &str = "bench";
const PASSWORD: &str = "bench-password-123";

const TENANT: &str = r#"
name = "Barbearia Bench"
slug = "bench"
timezone = "America/Sao_Paulo"
[whatsapp]
phone_number_id = "100000000000001"
[booking]
min_notice_minutes = 60
horizon_days = 30
slot_step_minutes = 30
[[services]]
name = "Corte masculino"
duration_minutes = 30
price = "50.00"
buffer_minutes = 10
[[professionals]]
name = "Zé"
services = ["Corte masculino"]
[professionals.hours]
mon = ["09:00-18:00"]
tue = ["09:00-18:00"]
wed = ["09:00-18:00"]
thu = ["09:00-18:00"]
fri = ["09:00-18:00"]
sat = ["09:00-18:00"]
[[professionals]]
name = "Rafa"
services = ["Corte masculino"]
[professionals.hours]
mon = ["09:00-18:00"]
tue = ["09:00-18:00"]
wed = ["09:00-18:00"]
thu = ["09:00-18:00"]
fri = ["09:00-18:00"]
sat = ["09:00-18:00"]
"#;

/// One appointment row to seed.
struct Seeded {
    contact: i64,
    professional: i64,
    starts_at: DateTime<Utc>,
    ends_at: DateTime<Utc>,
    status: &'static str,
}

/// Bulk inserts on one pool type (the SQL is the same for both; only the pool differs).
macro_rules! seed {
    ($db:ty, $pool:expr, $tenant:expr, $service:expr, $conversations:expr, $appointments:expr, $now:expr) => {{
        let pool = $pool;
        let mut tx = pool.begin().await.expect("begin");
        for (n, chunk) in $appointments.chunks(CHUNK).enumerate() {
            let mut q: QueryBuilder<$db> = QueryBuilder::new(
                "INSERT INTO appointments (tenant_id, contact_id, service_id, professional_id, starts_at, ends_at,
                 status, price_cents, idempotency_key, created_at, updated_at) ",
            );
            q.push_values(chunk.iter().enumerate(), |mut b, (i, a)| {
                b.push_bind($tenant)
                    .push_bind(a.contact)
                    .push_bind($service)
                    .push_bind(a.professional)
                    .push_bind(a.starts_at)
                    .push_bind(a.ends_at)
                    .push_bind(a.status)
                    .push_bind(5000_i64)
                    .push_bind(format!("bench/{}", n * CHUNK + i))
                    .push_bind($now)
                    .push_bind($now);
            });
            q.build().execute(&mut *tx).await.expect("appointments");
        }
        tx.commit().await.expect("commit");
        let mut tx = pool.begin().await.expect("begin");
        let rows: Vec<(i64, usize)> = (0..MESSAGES).map(|i| ($conversations[i % $conversations.len()], i)).collect();
        for chunk in rows.chunks(CHUNK) {
            let mut q: QueryBuilder<$db> = QueryBuilder::new(
                "INSERT INTO inbound_messages (tenant_id, conversation_id, provider_message_id, kind, body,
                 received_at, raw) ",
            );
            q.push_values(chunk, |mut b, (conversation, i)| {
                b.push_bind($tenant)
                    .push_bind(*conversation)
                    .push_bind(format!("wamid.bench.{i}"))
                    .push_bind("text")
                    .push_bind(format!("Mensagem {i}: queria marcar um corte amanhã de tarde"))
                    .push_bind($now - TimeDelta::seconds((MESSAGES - i) as i64))
                    .push_bind(Json(serde_json::json!({ "id": i })));
            });
            q.build().execute(&mut *tx).await.expect("messages");
        }
        tx.commit().await.expect("commit");
        // What each conversation's trace reads: turns, with their model calls, ledger rows and
        // replies (TURNS per conversation, two of each per turn).
        let mut tx = pool.begin().await.expect("begin");
        let turns: Vec<(i64, i64)> = $conversations.iter().flat_map(|c| (0..TURNS).map(move |t| (*c, t))).collect();
        for chunk in turns.chunks(CHUNK / 2) {
            let mut q: QueryBuilder<$db> = QueryBuilder::new(
                "INSERT INTO jobs (tenant_id, conversation_id, state, run_at, debounce_deadline, attempts,
                 max_attempts, created_at, updated_at, finished_at) ",
            );
            q.push_values(chunk, |mut b, (conversation, t)| {
                let at = $now - TimeDelta::minutes(TURNS - t);
                b.push_bind($tenant)
                    .push_bind(*conversation)
                    .push_bind("completed")
                    .push_bind(at)
                    .push_bind(at)
                    .push_bind(1_i64)
                    .push_bind(5_i64)
                    .push_bind(at)
                    .push_bind(at)
                    .push_bind(at);
            });
            q.push(" RETURNING id, conversation_id");
            let jobs: Vec<(i64, i64)> = q.build_query_as().fetch_all(&mut *tx).await.expect("jobs");
            let mut q: QueryBuilder<$db> = QueryBuilder::new(
                "INSERT INTO model_calls (tenant_id, conversation_id, turn_id, seq, provider, request_id,
                 stop_reason, latency_ms, input_tokens, output_tokens, created_at) ",
            );
            q.push_values(jobs.iter().flat_map(|j| [(j, 0_i64), (j, 1)]), |mut b, ((job, conversation), seq)| {
                b.push_bind($tenant)
                    .push_bind(*conversation)
                    .push_bind(*job)
                    .push_bind(seq)
                    .push_bind("anthropic")
                    .push_bind(format!("req_{job}_{seq}"))
                    .push_bind(if seq == 0 { "tool_use" } else { "end_turn" })
                    .push_bind(800_i64)
                    .push_bind(2400_i64)
                    .push_bind(120_i64)
                    .push_bind($now);
            });
            q.build().execute(&mut *tx).await.expect("model calls");
            let mut q: QueryBuilder<$db> = QueryBuilder::new(
                "INSERT INTO agent_tool_executions (tenant_id, idempotency_key, tool, fingerprint, arguments,
                 conversation_id, contact_id, turn_id, reserved_by, status, result, generation, replay_count,
                 created_at, updated_at) ",
            );
            q.push_values(jobs.iter().flat_map(|j| [(j, 0_i64), (j, 1)]), |mut b, ((job, conversation), n)| {
                b.push_bind($tenant)
                    .push_bind(format!("check_availability/v1/bench-{job}-{n}"))
                    .push_bind("check_availability")
                    .push_bind("f")
                    .push_bind(Json(serde_json::json!({ "date": "2026-12-03" })))
                    .push_bind(*conversation)
                    .push_bind(0_i64)
                    .push_bind(*job)
                    .push_bind("bench")
                    .push_bind("succeeded")
                    .push_bind(Json(serde_json::json!({ "slots": ["09:00", "09:30"] })))
                    .push_bind(1_i64)
                    .push_bind(n)
                    .push_bind($now)
                    .push_bind($now);
            });
            q.build().execute(&mut *tx).await.expect("ledger");
            let mut q: QueryBuilder<$db> = QueryBuilder::new(
                "INSERT INTO outbound_messages (tenant_id, conversation_id, idempotency_key, to_wa_id, message,
                 status, next_attempt_at, created_at, updated_at) ",
            );
            q.push_values(jobs.iter().flat_map(|j| [(j, 0_i64), (j, 1)]), |mut b, ((job, conversation), n)| {
                b.push_bind($tenant)
                    .push_bind(*conversation)
                    .push_bind(format!("turn:{job}:{n}"))
                    .push_bind("5511900000000")
                    .push_bind(Json(serde_json::json!({ "type": "text", "body": "Temos horário às 09:00 e 09:30." })))
                    .push_bind("delivered")
                    .push_bind($now)
                    .push_bind($now)
                    .push_bind($now);
            });
            q.build().execute(&mut *tx).await.expect("outbound");
        }
        tx.commit().await.expect("commit");
    }};
}

/// A browser without JavaScript: cookies kept by hand (the client has no cookie store).
struct Browser {
    http: reqwest::Client,
    base: String,
    cookies: HashMap<String, String>,
}

impl Browser {
    fn cookie(&self) -> String {
        self.cookies.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join("; ")
    }

    fn keep(&mut self, r: &reqwest::Response) {
        for v in r.headers().get_all("set-cookie") {
            if let Some((k, v)) = v.to_str().ok().and_then(|s| s.split(';').next()).and_then(|p| p.split_once('=')) {
                self.cookies.insert(k.to_owned(), v.to_owned());
            }
        }
    }

    async fn get(&mut self, path: &str) -> (u16, String) {
        let r =
            self.http.get(format!("{}{path}", self.base)).header("cookie", self.cookie()).send().await.expect("get");
        self.keep(&r);
        (r.status().as_u16(), r.text().await.expect("body"))
    }

    async fn login(&mut self, email: &str) {
        let (_, form) = self.get("/admin/login").await;
        let at = form.find("name=\"authenticity_token\"").expect("token field");
        let v = at + form[at..].find("value=\"").expect("value") + 7;
        let token = form[v..v + form[v..].find('"').expect("end")].to_owned();
        let r = self
            .http
            .post(format!("{}/admin/login", self.base))
            .header("cookie", self.cookie())
            .form(&[("authenticity_token", token.as_str()), ("email", email), ("password", PASSWORD)])
            .send()
            .await
            .expect("login");
        assert_eq!(r.status().as_u16(), 303, "login failed");
        self.keep(&r);
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// Median and p95 of `path`, and how many appointments the page draws.
async fn measure(browser: &mut Browser, path: &str) -> Option<(Duration, Duration, usize)> {
    let (status, first) = browser.get(path).await;
    if status != 200 {
        return None;
    }
    let blocks = first.matches("data-appointment=").count();
    let mut times = Vec::with_capacity(RENDERS);
    for _ in 0..RENDERS {
        let started = Instant::now();
        let (status, body) = browser.get(path).await;
        times.push(started.elapsed());
        assert!(status == 200 && !body.is_empty());
    }
    times.sort();
    Some((percentile(&times, 0.5), percentile(&times, 0.95), blocks))
}

fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1000.0)
}

async fn run(name: &str, url: &str) -> String {
    let store = Store::connect(&DatabaseUrl::new(url), 16).await.expect("connect");
    store.migrate().await.expect("migrate");
    let spec = TenantSpec::parse(TENANT).expect("spec");
    let now = Utc::now();
    let tenant = store.apply_tenant(&spec, now).await.expect("tenant").id();
    store.apply_catalog(tenant, &spec.catalog).await.expect("catalog");
    let (services, professionals) = store.catalog(tenant).await.expect("catalog");
    let service = services[0].id;
    let tz: chrono_tz::Tz = "America/Sao_Paulo".parse().expect("zone");

    let seeding = Instant::now();
    let mut conversations = Vec::with_capacity(CONTACTS);
    let mut contacts = Vec::with_capacity(CONTACTS);
    for i in 0..CONTACTS {
        let phone = PhoneE164::parse(&format!("+5511{:09}", 900_000_000 + i)).expect("phone");
        let who = ContactIdentity {
            wa_id: Some(phone),
            user_id: None,
            username: None,
            profile_name: Some(format!("Cliente {i}")),
        };
        let conversation = store.ensure_conversation(tenant, &who, now).await.expect("conversation");
        contacts.push(store.conversation_contact(tenant, conversation).await.expect("contact").contact_id.0);
        conversations.push(conversation.0);
    }
    // Eight 40-minute blocks a day per professional, six days a week, spread around today:
    // the measured week is as full as any other.
    let today = now.with_timezone(&tz).date_naive();
    let per_day = 8 * professionals.len();
    let days_needed = APPOINTMENTS.div_ceil(per_day) * 7 / 6 + 1;
    let mut day = today - Days::new(days_needed as u64 / 2);
    let mut appointments = Vec::with_capacity(APPOINTMENTS);
    while appointments.len() < APPOINTMENTS {
        if day.weekday() != Weekday::Sun {
            for slot in 0..8 {
                for p in &professionals {
                    if appointments.len() == APPOINTMENTS {
                        break;
                    }
                    let local = day.and_time(NaiveTime::from_hms_opt(9 + slot, 0, 0).expect("time"));
                    let starts_at = tz.from_local_datetime(&local).earliest().expect("local").with_timezone(&Utc);
                    let n = appointments.len();
                    appointments.push(Seeded {
                        contact: contacts[n % contacts.len()],
                        professional: p.id,
                        starts_at,
                        ends_at: starts_at + TimeDelta::minutes(40),
                        status: if n % 10 == 0 { "cancelled" } else { "confirmed" },
                    });
                }
            }
        }
        day = day + Days::new(1);
    }
    match url.starts_with("postgres") {
        true => {
            let pool = sqlx::PgPool::connect(url).await.expect("pool");
            seed!(sqlx::Postgres, &pool, tenant.0, service, conversations, appointments, now);
            // What autovacuum does after a bulk load in production: plans need statistics.
            sqlx::query("ANALYZE").execute(&pool).await.expect("analyze");
            pool.close().await;
        }
        false => {
            let pool = sqlx::SqlitePool::connect(url).await.expect("pool");
            seed!(sqlx::Sqlite, &pool, tenant.0, service, conversations, appointments, now);
            sqlx::query("ANALYZE").execute(&pool).await.expect("analyze");
            pool.close().await;
        }
    }
    let seeded = seeding.elapsed();

    balcao::http::console::auth::add_admin(&store, "bench@example.com", PASSWORD, SLUG).await.expect("admin");
    let vars: HashMap<String, String> =
        [("BALCAO_ADDR", "127.0.0.1:0"), ("WHATSAPP_APP_SECRET", "bench-secret"), ("RUST_LOG", "warn")]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
    let app = App::build(Config::from_vars(&vars).expect("config"), store.clone()).await.expect("app");
    let base = format!("http://{}", app.local_addr().expect("addr"));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(app.run_http_only(async move {
        let _ = stopped.await;
    }));
    let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().expect("client");
    let mut browser = Browser { http, base, cookies: HashMap::new() };
    browser.login("bench@example.com").await;

    let date = today.format("%Y-%m-%d");
    let pages = [
        ("agenda (day)", format!("/admin/{SLUG}/agenda?date={date}")),
        ("agenda (week)", format!("/admin/{SLUG}/agenda?date={date}&view=week")),
        ("conversation + trace", format!("/admin/{SLUG}/conversations/{}", conversations[0])),
        ("conversation list", format!("/admin/{SLUG}/conversations")),
    ];
    let mut rows = String::new();
    for (page, path) in pages {
        rows += &match measure(&mut browser, &path).await {
            Some((median, p95, blocks)) => format!(
                "| {name} | {page} | {blocks} | {} | {} | {RENDERS} | {:.1} |\n",
                ms(median),
                ms(p95),
                seeded.as_secs_f64()
            ),
            None => format!("| {name} | {page} | – | n/a | n/a | 0 | {:.1} |\n", seeded.as_secs_f64()),
        };
    }
    let _ = stop.send(());
    let _ = server.await;
    store.close().await;
    rows
}

#[tokio::main]
async fn main() {
    let mut table = format!(
        "{MESSAGES} inbound messages, {APPOINTMENTS} appointments, {CONTACTS} contacts\n\n\
         | backend | page | appointments drawn | median ms | p95 ms | renders | seeding s |\n|---|---|---|---|---|---|---|\n"
    );
    let dir = tempfile::tempdir().expect("dir");
    table += &run("SQLite", &format!("sqlite://{}/console.db", dir.path().display())).await;
    let postgres = std::env::var("BALCAO_BENCH_POSTGRES_URL").or_else(|_| std::env::var("BALCAO_TEST_POSTGRES_URL"));
    if let Ok(server) = postgres {
        let admin = sqlx::PgPool::connect(&server).await.expect("postgres");
        let base = server.rsplit_once('/').map(|(b, _)| b.to_owned()).expect("url with a database");
        let db = "balcao_bench_console";
        sqlx::query(sqlx::AssertSqlSafe(format!("DROP DATABASE IF EXISTS {db}"))).execute(&admin).await.expect("drop");
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {db}"))).execute(&admin).await.expect("create");
        table += &run("PostgreSQL", &format!("{base}/{db}")).await;
    } else {
        eprintln!("PostgreSQL skipped: set BALCAO_BENCH_POSTGRES_URL to include it");
    }
    println!("\n{table}");
}
