//! The executor's overhead: an executed call of a no-op tool with a local effect (its row
//! claimed with its outcome, one commit) next to the same statements issued directly, the same
//! call with an outside effect (reserved, then settled: two commits), and the cost of a replay
//! next to its one statement, in the same run, on SQLite and PostgreSQL. The first table's calls are sequential (one task), so
//! its numbers are per-call latency without contention; the second runs [`TASKS`] tasks of
//! [`PER_TASK`] calls each at once, executed and then replayed, and reports calls per second.
//!
//! `cargo bench --bench executor`; set `BALCAO_BENCH_POSTGRES_URL` to add PostgreSQL.

use std::time::{Duration, Instant};

#[path = "common/mod.rs"]
mod common;

use async_trait::async_trait;
use balcao::domain::{ContactId, ConversationId, DatabaseUrl};
use balcao::ledger::{
    CallContext, Effect, Executor, FieldKind, FieldSpec, KeyPolicy, KeyScope, LedgerState, Reach, Tool, ToolCall,
    ToolFailure, ToolSpec, derive_key, fingerprint,
};
use balcao::store::{
    InboundStore, JobKind, LedgerStore, NewExecution, Recorded, Settlement, Store, TenantStore, TurnTiming,
};
use balcao::tenant::TenantSpec;
use balcao::whatsapp::{ContactIdentity, InboundContent, NewInbound};
use chrono::{TimeDelta, Utc};
use serde_json::{Value, json};

const CALLS: usize = 2_000;
/// Calls of each kind before the clock starts, on keys of their own (the peer makes as many).
const WARM_UP: usize = 200;
const ROUNDS: usize = 10;
/// The concurrent variant: this many tasks at once, each issuing [`PER_TASK`] calls.
const TASKS: usize = 8;
const PER_TASK: usize = 500;
/// One-row reads per task in the read-rate rows.
const READS: usize = 2_000;
/// Connections in the bench's pool: one per concurrent task.
const POOL: u32 = TASKS as u32;

static NOOP: ToolSpec = ToolSpec {
    name: "noop",
    description: "does nothing",
    effect: Effect::Write { policy: KeyPolicy::Business, on_conflict: "-", reach: Reach::Local },
    fields: &[FieldSpec { name: "item", kind: FieldKind::Text, required: true, identity: true, description: "-" }],
};

/// The same tool with an outside effect: reserved (durably) before its handler runs.
static NOOP_OUTSIDE: ToolSpec = ToolSpec {
    name: "noop_outside",
    effect: Effect::Write { policy: KeyPolicy::Business, on_conflict: "-", reach: Reach::Outside },
    ..NOOP
};

struct Noop(&'static ToolSpec);

#[async_trait]
impl Tool for Noop {
    fn spec(&self) -> &'static ToolSpec {
        self.0
    }
    async fn run(&self, _call: &ToolCall<'_>) -> Result<Value, ToolFailure> {
        Ok(json!({ "ok": true }))
    }
}

struct Timings(Vec<Duration>);

impl Timings {
    fn mean_us(&self) -> f64 {
        self.0.iter().map(Duration::as_secs_f64).sum::<f64>() / self.0.len() as f64 * 1e6
    }
    fn p(&self, q: f64) -> f64 {
        let mut v = self.0.clone();
        v.sort();
        v[((v.len() as f64 * q) as usize).min(v.len() - 1)].as_secs_f64() * 1e6
    }
}

async fn setup(url: &str) -> (Store, balcao::tenant::Tenant, ContactId, ConversationId) {
    let store = Store::connect(&DatabaseUrl::new(url), POOL).await.expect("connect");
    store.migrate().await.expect("migrate");
    let spec = TenantSpec::parse(
        "name = \"B\"\nslug = \"b\"\ntimezone = \"America/Sao_Paulo\"\n[whatsapp]\nphone_number_id = \"1\"\n",
    )
    .expect("spec");
    let id = store.apply_tenant(&spec, Utc::now()).await.expect("tenant").id();
    let tenant = store.tenant(id).await.expect("load").expect("tenant");
    let message = NewInbound {
        provider_message_id: "wamid.bench".into(),
        contact: ContactIdentity {
            wa_id: Some(balcao::domain::PhoneE164::parse("5511999990000").expect("phone")),
            user_id: None,
            username: None,
            profile_name: None,
        },
        content: InboundContent::Text { body: "oi".into() },
        context_id: None,
        sent_at: None,
        raw: json!({}),
        simulated_by: None,
        sender_hashes: Vec::new(),
    };
    let timing = TurnTiming { debounce: TimeDelta::zero(), debounce_max: TimeDelta::zero(), max_attempts: 1 };
    let Ok(Recorded::New { conversation, .. }) =
        store.record_inbound(tenant.id, &message, JobKind::Turn, &timing, Utc::now()).await
    else {
        panic!("record");
    };
    let contact = store.conversation_contact(tenant.id, conversation).await.expect("contact").contact_id;
    (store, tenant, contact, conversation)
}

/// The statements of a local-effect call of the no-op tool on `item`, issued directly: the
/// probe (which finds no row for a fresh key) and, when `fresh`, the insert of the settled row.
async fn direct(
    store: &Store,
    tenant: &balcao::tenant::Tenant,
    contact: ContactId,
    conversation: ConversationId,
    item: &str,
    fresh: bool,
) {
    let key = noop_key(tenant, contact, item);
    let found = store.probe_execution(tenant.id, &key).await.expect("probe");
    assert_eq!(found.is_none(), fresh);
    if fresh {
        insert(store, tenant, contact, conversation, item).await;
    }
}

fn noop_key(tenant: &balcao::tenant::Tenant, contact: ContactId, item: &str) -> balcao::domain::LedgerKey {
    let args = NOOP.normalize(&json!({ "item": item })).expect("args");
    let scope = KeyScope { tenant: tenant.id, customer: contact, trigger_message_id: None };
    derive_key(NOOP.name, KeyPolicy::Business, &scope, &NOOP.identity(&args)).expect("key")
}

/// The floor of an executed call: its one durable one-row insert (the settled ledger row of a
/// fresh key), alone.
async fn insert(
    store: &Store,
    tenant: &balcao::tenant::Tenant,
    contact: ContactId,
    conversation: ConversationId,
    item: &str,
) {
    let args = NOOP.normalize(&json!({ "item": item })).expect("args");
    let key = noop_key(tenant, contact, item);
    let (fingerprint, arguments) = (fingerprint(&args), args.to_value());
    let new = NewExecution {
        tenant: tenant.id,
        key: &key,
        tool: NOOP.name,
        fingerprint: &fingerprint,
        arguments: &arguments,
        conversation,
        contact,
        turn: None,
        tool_use_id: None,
        turn_attempt: None,
    };
    let result = json!({ "ok": true });
    let settled = Settlement { state: LedgerState::Succeeded, result: Some(&result), error: None };
    store.insert_settled_execution(&new, &settled, Utc::now()).await.expect("insert").expect("fresh key");
}

/// The floor without Balcão: one durable one-row insert into a bare two-column table, on a
/// connection of its own (no pool), with the server's durability settings.
enum Bare {
    Postgres(sqlx::PgConnection),
    Sqlite(sqlx::SqliteConnection),
}

impl Bare {
    async fn connect(url: &str) -> Bare {
        use sqlx::Connection;
        use std::str::FromStr;
        if url.starts_with("postgres") {
            let mut conn = sqlx::PgConnection::connect(url).await.expect("postgres");
            sqlx::raw_sql("CREATE TABLE IF NOT EXISTS bench_floor (id BIGSERIAL PRIMARY KEY, v TEXT NOT NULL)")
                .execute(&mut conn)
                .await
                .expect("table");
            Bare::Postgres(conn)
        } else {
            let options = sqlx::sqlite::SqliteConnectOptions::from_str(url)
                .expect("url")
                .journal_mode(sqlx::sqlite::SqliteJournalMode::Wal)
                .synchronous(sqlx::sqlite::SqliteSynchronous::Normal)
                .busy_timeout(Duration::from_secs(10));
            let mut conn = sqlx::SqliteConnection::connect_with(&options).await.expect("sqlite");
            sqlx::raw_sql("CREATE TABLE IF NOT EXISTS bench_floor (id INTEGER PRIMARY KEY, v TEXT NOT NULL)")
                .execute(&mut conn)
                .await
                .expect("table");
            Bare::Sqlite(conn)
        }
    }

    async fn insert(&mut self, v: &str) {
        const SQL: &str = "INSERT INTO bench_floor (v) VALUES ($1)";
        match self {
            Bare::Postgres(conn) => sqlx::query(SQL).bind(v).execute(conn).await.map(|_| ()),
            Bare::Sqlite(conn) => sqlx::query(SQL).bind(v).execute(conn).await.map(|_| ()),
        }
        .expect("insert");
    }
}

/// Calls per second of the four workloads the peer runs too, in [`PEER_WORKLOADS`] order.
type Rates = [f64; 4];

/// The peer's row names (scripts/bench_peer.py), in the order of [`Rates`].
const PEER_WORKLOADS: [&str; 4] = ["executed sequential", "replay sequential", "executed 8 × 500", "replay 8 × 500"];

async fn bench(name: &str, url: &str) -> (String, String, Rates, String) {
    let (store, tenant, contact, conversation) = setup(url).await;
    let executor = Executor::new(store.clone(), Duration::from_secs(120));
    let ctx = |now| CallContext::outside_turn(&tenant, contact, conversation, now);
    // Before the clock: every kind of call, then the planner's statistics (`common::analyze`).
    // Without them PostgreSQL's generic plan for the probe walked the tenant's rows by the
    // `subject` index, filtering on the key, instead of the unique index.
    for i in 0..WARM_UP {
        let input = json!({ "item": format!("warm-{i}") });
        for spec in [&NOOP, &NOOP, &NOOP_OUTSIDE] {
            executor.execute(&Noop(spec), &ctx(Utc::now()), &input).await.expect("warm-up");
        }
        direct(&store, &tenant, contact, conversation, &format!("warm-direct-{i}"), true).await;
        insert(&store, &tenant, contact, conversation, &format!("warm-floor-{i}")).await;
    }
    common::analyze(url).await;
    let mut bare = Bare::connect(url).await;
    for i in 0..WARM_UP {
        bare.insert(&format!("warm-{i}")).await;
    }
    let (mut via_executor, mut issued, mut outside, mut replay, mut one_statement, mut one_read, mut floor) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut bare_floor = Vec::new();
    // Interleaved rounds, so drift in the machine's speed hits both sides alike.
    for round in 0..ROUNDS {
        for i in 0..CALLS / ROUNDS {
            let input = json!({ "item": format!("exec-{round}-{i}") });
            let now = Utc::now();
            let started = Instant::now();
            // A call is a unit of work, as inside a turn: its statements share one connection.
            let outcome = store.unit(executor.execute(&Noop(&NOOP), &ctx(now), &input)).await.expect("execute");
            via_executor.push(started.elapsed());
            assert!(matches!(outcome, balcao::ledger::Outcome::Executed(_)));
        }
        for i in 0..CALLS / ROUNDS {
            let started = Instant::now();
            direct(&store, &tenant, contact, conversation, &format!("direct-{round}-{i}"), true).await;
            issued.push(started.elapsed());
        }
        for i in 0..CALLS / ROUNDS {
            let input = json!({ "item": format!("outside-{round}-{i}") });
            let started = Instant::now();
            let outcome =
                store.unit(executor.execute(&Noop(&NOOP_OUTSIDE), &ctx(Utc::now()), &input)).await.expect("execute");
            outside.push(started.elapsed());
            assert!(matches!(outcome, balcao::ledger::Outcome::Executed(_)));
        }
        for i in 0..CALLS / ROUNDS {
            let input = json!({ "item": format!("exec-{round}-{i}") });
            let started = Instant::now();
            let outcome = store.unit(executor.execute(&Noop(&NOOP), &ctx(Utc::now()), &input)).await.expect("replay");
            replay.push(started.elapsed());
            assert!(matches!(outcome, balcao::ledger::Outcome::AlreadyDone(_)));
        }
        for i in 0..CALLS / ROUNDS {
            // The one statement a replay costs: the probe that finds the row.
            let started = Instant::now();
            direct(&store, &tenant, contact, conversation, &format!("direct-{round}-{i}"), false).await;
            one_statement.push(started.elapsed());
        }
        for _ in 0..CALLS / ROUNDS {
            let started = Instant::now();
            store.count_inbound(tenant.id).await.expect("one read");
            one_read.push(started.elapsed());
        }
        for i in 0..CALLS / ROUNDS {
            let started = Instant::now();
            insert(&store, &tenant, contact, conversation, &format!("floor-{round}-{i}")).await;
            floor.push(started.elapsed());
        }
        for i in 0..CALLS / ROUNDS {
            let started = Instant::now();
            bare.insert(&format!("floor-{round}-{i}")).await;
            bare_floor.push(started.elapsed());
        }
    }
    let b = Timings(bare_floor);
    let (e, d, x, r, o, q, f) = (
        Timings(via_executor),
        Timings(issued),
        Timings(outside),
        Timings(replay),
        Timings(one_statement),
        Timings(one_read),
        Timings(floor),
    );
    let mut ratios = String::new();
    let (executed_rate, replay_rate) = concurrent(&store, &executor, &tenant, contact, conversation).await;
    let mut concurrent = format!(
        "| {name} | executed via executor | {TASKS} × {PER_TASK} | {executed_rate:.0} | {:.0} | {:.2}× |\n\
         | {name} | replay via executor (`already_done`) | {TASKS} × {PER_TASK} | {replay_rate:.0} | {:.0} | {:.2}× |\n",
        1e6 / e.mean_us(),
        executed_rate * e.mean_us() / 1e6,
        1e6 / r.mean_us(),
        replay_rate * r.mean_us() / 1e6,
    );
    if store.connection_id().await.expect("id").is_some() {
        let rate = reads(&store).await;
        concurrent += &format!(
            "| {name} | one-row read (`SELECT pg_backend_pid()`), a unit per task | {TASKS} × {READS} | {rate:.0} | | |\n"
        );
    }
    let sequential = format!(
        "| {name} | executed via executor, local effect (one commit) | {:.0} | {:.0} | {:.0} | {:.2}× direct |\n\
         | {name} | its probe + settled insert issued directly (one durable) | {:.0} | {:.0} | {:.0} | |\n\
         | {name} | executed via executor, outside effect (reserve, then settle) | {:.0} | {:.0} | {:.0} | {:.2}× local |\n\
         | {name} | replay via executor (`already_done`) | {:.0} | {:.0} | {:.0} | {:.2}× its one statement |\n\
         | {name} | the probe on an existing key, directly | {:.0} | {:.0} | {:.0} | |\n\
         | {name} | the floor: one durable one-row insert (a settled ledger row) | {:.0} | {:.0} | {:.0} | |\n\
         | {name} | the floor: one indexed read | {:.0} | {:.0} | {:.0} | |\n\
         | {name} | the bare floor: one durable one-row insert into a two-column table, own connection | {:.0} | {:.0} | {:.0} | |\n",
        e.mean_us(),
        e.p(0.5),
        e.p(0.99),
        e.mean_us() / d.mean_us(),
        d.mean_us(),
        d.p(0.5),
        d.p(0.99),
        x.mean_us(),
        x.p(0.5),
        x.p(0.99),
        x.mean_us() / e.mean_us(),
        r.mean_us(),
        r.p(0.5),
        r.p(0.99),
        r.mean_us() / o.mean_us(),
        o.mean_us(),
        o.p(0.5),
        o.p(0.99),
        f.mean_us(),
        f.p(0.5),
        f.p(0.99),
        q.mean_us(),
        q.p(0.5),
        q.p(0.99),
        b.mean_us(),
        b.p(0.5),
        b.p(0.99),
    );
    ratios += &format!(
        "ratio | executed local call ÷ one durable insert of its ledger row ({name}) | {:.2}× | target ≤ 1.5×\n\
         ratio | executed local call ÷ one durable insert into a bare table ({name}) | {:.2}× | target ≤ 1.5×\n\
         ratio | replay ÷ one indexed read ({name}) | {:.2}× | target ≤ 1.3×\n",
        e.mean_us() / f.mean_us(),
        e.mean_us() / b.mean_us(),
        r.mean_us() / q.mean_us(),
    );
    let rates = [1e6 / e.mean_us(), 1e6 / r.mean_us(), executed_rate, replay_rate];
    (sequential, concurrent, rates, ratios)
}

/// Runs `scripts/bench-peer` (agent-ledger 0.2.1 on the same PostgreSQL, right after Balcão)
/// and returns its best calls/s per workload over its two pool settings.
fn peer() -> Option<Rates> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/bench-peer");
    let output = match std::process::Command::new(script).output() {
        Ok(o) if o.status.success() => o,
        Ok(o) => {
            eprintln!("the peer bench failed: {}", String::from_utf8_lossy(&o.stderr));
            return None;
        }
        Err(e) => {
            eprintln!("the peer bench could not start: {e}");
            return None;
        }
    };
    let table = String::from_utf8_lossy(&output.stdout).into_owned();
    println!("\n{table}");
    let mut best = [0.0f64; 4];
    for line in table.lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        if let [_, _, what, rate, ..] = cells.as_slice()
            && let (Some(i), Ok(rate)) = (PEER_WORKLOADS.iter().position(|w| w == what), rate.parse::<f64>())
        {
            best[i] = best[i].max(rate);
        }
    }
    best.iter().all(|r| *r > 0.0).then_some(best)
}

/// Reads per second of [`TASKS`] tasks each running [`READS`] one-row reads as one unit of
/// work (one connection per task): the concurrent floor of a statement.
async fn reads(store: &Store) -> f64 {
    let started = Instant::now();
    let tasks: Vec<_> = (0..TASKS)
        .map(|_| {
            let store = store.clone();
            tokio::spawn(async move {
                store
                    .unit(async {
                        for _ in 0..READS {
                            store.connection_id().await.expect("read");
                        }
                    })
                    .await
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("task");
    }
    (TASKS * READS) as f64 / started.elapsed().as_secs_f64()
}

/// [`TASKS`] tasks of [`PER_TASK`] executed calls each, all at once, then the same calls again
/// (every one a replay); calls per second of each phase, from the first call to the last answer.
async fn concurrent(
    store: &Store,
    executor: &Executor,
    tenant: &balcao::tenant::Tenant,
    contact: ContactId,
    conversation: ConversationId,
) -> (f64, f64) {
    let mut rates = [0.0; 2];
    for (phase, rate) in rates.iter_mut().enumerate() {
        let started = Instant::now();
        let tasks: Vec<_> = (0..TASKS)
            .map(|task| {
                let (store, executor, tenant) = (store.clone(), executor.clone(), tenant.clone());
                tokio::spawn(async move {
                    for i in 0..PER_TASK {
                        let ctx = CallContext::outside_turn(&tenant, contact, conversation, Utc::now());
                        let input = json!({ "item": format!("concurrent-{task}-{i}") });
                        let outcome = store.unit(executor.execute(&Noop(&NOOP), &ctx, &input)).await.expect("execute");
                        match phase {
                            0 => assert!(matches!(outcome, balcao::ledger::Outcome::Executed(_))),
                            _ => assert!(matches!(outcome, balcao::ledger::Outcome::AlreadyDone(_))),
                        }
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.expect("task");
        }
        *rate = (TASKS * PER_TASK) as f64 / started.elapsed().as_secs_f64();
    }
    (rates[0], rates[1])
}

#[tokio::main]
async fn main() {
    let mut table = String::from("| backend | what | mean µs | p50 µs | p99 µs | ratio |\n|---|---|---|---|---|---|\n");
    let mut rates = String::from(
        "| backend | what | tasks × calls | calls/s | sequential calls/s | concurrent ÷ sequential |\n\
         |---|---|---|---|---|---|\n",
    );
    let dir = tempfile::tempdir().expect("dir");
    let (sequential, concurrent, _, mut ratios) =
        bench("SQLite", &format!("sqlite://{}/ledger.db", dir.path().display())).await;
    (table, rates) = (table + &sequential, rates + &concurrent);
    let mut versus = String::new();
    if let Ok(server) = std::env::var("BALCAO_BENCH_POSTGRES_URL") {
        let admin = sqlx::PgPool::connect(&server).await.expect("postgres");
        for sql in ["DROP DATABASE IF EXISTS balcao_bench_ledger", "CREATE DATABASE balcao_bench_ledger"] {
            sqlx::query(sql).execute(&admin).await.expect("database");
        }
        let base = server.rsplit_once('/').map(|(b, _)| b.to_owned()).expect("url with a database");
        let (sequential, concurrent, ours, more) = bench("PostgreSQL", &format!("{base}/balcao_bench_ledger")).await;
        (table, rates) = (table + &sequential, rates + &concurrent);
        ratios += &more;
        // The peer on the same server in the same run (BALCAO_BENCH_PEER=0 skips it).
        if std::env::var("BALCAO_BENCH_PEER").map_or(true, |v| v != "0")
            && let Some(theirs) = peer()
        {
            versus = String::from(
                "| workload (PostgreSQL) | Balcão calls/s | agent-ledger 0.2.1 calls/s (best pool) | Balcão ÷ peer |\n\
                 |---|---|---|---|\n",
            );
            for (i, what) in PEER_WORKLOADS.iter().enumerate() {
                versus += &format!("| {what} | {:.0} | {:.0} | {:.1}× |\n", ours[i], theirs[i], ours[i] / theirs[i]);
                ratios += &format!(
                    "ratio | Balcão ÷ agent-ledger 0.2.1, {what} (PostgreSQL) | {:.1}× | peer\n",
                    ours[i] / theirs[i]
                );
            }
        }
    } else {
        eprintln!("PostgreSQL skipped: set BALCAO_BENCH_POSTGRES_URL to include it");
    }
    println!("\n{table}\n{rates}\n{versus}\n{ratios}");
}
