//! Several server processes on one PostgreSQL: intake and turns with 1, 2 and 3 `balcao`
//! processes (the real binary, as child processes) sharing one fresh database, each webhook
//! sent to the next process in turn.
//!
//! - Intake: a long debounce keeps turns out of the window; 20,000 one-message webhooks at full
//!   speed from 32 connections, 10% redeliveries (which may reach another process than the
//!   first delivery: the database's unique id deduplicates them).
//! - Turns: debounce 0, the Anthropic agent against a loopback fake model (one `list_services`
//!   call, then the answer), 4 workers per process; 400 customers write once; the clock runs
//!   from the first webhook to the 400th reply row in `outbound_messages`.
//!
//! Per process it reads `/metrics` (messages stored, turns completed) and its CPU time from
//! `/proc/<pid>/stat`; beside them the CPU of this load generator (which also serves the fake
//! model), of every PostgreSQL process and of the whole machine over the phase, so the table
//! says what limits the figures. Every figure is also given as a ratio to the 1-process run.
//!
//! `BALCAO_BENCH_POSTGRES_URL=postgres://… cargo bench --bench scale` (PostgreSQL only; it
//! creates and drops the databases `balcao_bench_scale_*`).

#[path = "common/mod.rs"]
mod common;

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use balcao::domain::DatabaseUrl;
use balcao::store::{CatalogStore, Store, TenantStore};
use balcao::tenant::TenantSpec;
use common::Server;

const INTAKE_MESSAGES: usize = 20_000;
const CONNECTIONS: usize = 32;
const DUPLICATE_EVERY: usize = 10;
const TURNS: usize = 400;
const WORKERS: usize = 4;
/// Each process's pool, as in the intake bench.
const POOL: usize = 16;

fn spec() -> TenantSpec {
    TenantSpec::parse(
        &std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tenants/example.toml")).expect("example"),
    )
    .expect("spec")
}

/// CPU counters at one instant: each server, this process, PostgreSQL, the machine.
struct Cpu {
    servers: Vec<f64>,
    generator: f64,
    postgres: f64,
    machine: (f64, f64),
}

impl Cpu {
    fn read(servers: &[Server]) -> Cpu {
        Cpu {
            servers: servers.iter().map(|s| common::cpu_seconds(&s.pid.to_string())).collect(),
            generator: common::cpu_seconds("self"),
            postgres: common::postgres_cpu_seconds(),
            machine: common::machine_cpu_seconds(),
        }
    }
}

/// One phase with `n` processes: its rate, latencies, per-process counters and CPU shares.
struct Phase {
    processes: usize,
    rate: f64,
    latency: Option<(f64, f64)>,
    /// Per process: the counter read from `/metrics`, CPU seconds.
    per_process: Vec<(f64, f64)>,
    generator: f64,
    postgres: f64,
    /// Busy share of all cores over the phase.
    machine_busy: f64,
    elapsed: f64,
    note: String,
}

impl Phase {
    fn measure(processes: usize, before: &Cpu, after: &Cpu, elapsed: Duration, counters: Vec<f64>) -> Phase {
        let wall = elapsed.as_secs_f64();
        let per_process =
            counters.into_iter().enumerate().map(|(i, c)| (c, after.servers[i] - before.servers[i])).collect();
        Phase {
            processes,
            rate: 0.0,
            latency: None,
            per_process,
            generator: after.generator - before.generator,
            postgres: after.postgres - before.postgres,
            machine_busy: (after.machine.0 - before.machine.0) / (after.machine.1 - before.machine.1),
            elapsed: wall,
            note: String::new(),
        }
    }

    fn servers_cpu(&self) -> f64 {
        self.per_process.iter().map(|(_, cpu)| cpu).sum()
    }

    /// A table row; `one` is the 1-process phase of the same run (ratios against it).
    fn row(&self, what: &str, unit: &str, one: &Phase) -> String {
        let cores = |cpu: f64| cpu / self.elapsed;
        let per_process = self
            .per_process
            .iter()
            .map(|(count, cpu)| format!("{count:.0} {unit}, {:.2} cores", cores(*cpu)))
            .collect::<Vec<_>>()
            .join("; ");
        let latency = self.latency.map_or("–".into(), |(p50, p99)| format!("{p50:.1} / {p99:.1}"));
        let work = self.rate * self.elapsed;
        let server_ms = self.servers_cpu() * 1000.0 / work;
        let one_server_ms = one.servers_cpu() * 1000.0 / (one.rate * one.elapsed);
        format!(
            "| {what} | {} | {:.0} | {:.2}× | {latency} | {per_process} | {server_ms:.2} ({:.2}×) | {:.2} | {:.2} | {:.0}% | {} |\n",
            self.processes,
            self.rate,
            self.rate / one.rate,
            server_ms / one_server_ms,
            cores(self.generator),
            cores(self.postgres),
            self.machine_busy * 100.0,
            self.note,
        )
    }
}

/// A fresh database with the example tenant and its catalog; returns its URL.
async fn prepare(admin: &sqlx::PgPool, server: &str, name: &str) -> String {
    let url = common::fresh_database(admin, server, name).await;
    let store = Store::connect(&DatabaseUrl::new(&url), 2).await.expect("connect");
    store.migrate().await.expect("migrate");
    let spec = spec();
    let tenant = store.apply_tenant(&spec, chrono::Utc::now()).await.expect("tenant").id();
    store.apply_catalog(tenant, &spec.catalog).await.expect("catalog");
    store.close().await;
    url
}

async fn start(url: &str, n: usize, settings: &[(&str, String)]) -> Vec<Server> {
    let mut servers = Vec::new();
    for _ in 0..n {
        servers.push(Server::start(url, settings).await);
    }
    // Let each finish its start-up work (migrations check, first polls) outside the window.
    tokio::time::sleep(Duration::from_secs(1)).await;
    servers
}

fn wamid(run: &str, i: usize) -> String {
    // Every tenth message repeats an earlier id: a redelivery, possibly to another process.
    let n = if i % DUPLICATE_EVERY == DUPLICATE_EVERY - 1 { i / 2 } else { i };
    format!("wamid.{run}.{n}")
}

async fn intake(admin: &sqlx::PgPool, server: &str, n: usize) -> Phase {
    let name = format!("balcao_bench_scale_intake_{n}");
    let url = prepare(admin, server, &name).await;
    let settings = [
        ("BALCAO_DEBOUNCE_MS", "600000".to_owned()),
        ("BALCAO_DEBOUNCE_MAX_MS", "1200000".to_owned()),
        ("BALCAO_DB_MAX_CONNECTIONS", POOL.to_string()),
    ];
    let servers = start(&url, n, &settings).await;
    let phone = spec().phone_number_id;
    let run = format!("p{n}");
    let bodies: Arc<Vec<(Vec<u8>, String)>> = Arc::new(
        (0..INTAKE_MESSAGES)
            .map(|i| {
                let from = format!("55119{:08}", i % 5_000);
                common::webhook(&phone, &from, &wamid(&run, i), "quero marcar um corte amanhã às 14h")
            })
            .collect(),
    );
    let distinct = (0..INTAKE_MESSAGES).map(|i| wamid(&run, i)).collect::<HashSet<_>>().len();
    let client = reqwest::Client::builder().pool_max_idle_per_host(CONNECTIONS).build().expect("client");
    let bases: Arc<Vec<String>> = Arc::new(servers.iter().map(|s| s.base.clone()).collect());
    let before = Cpu::read(&servers);
    let stats = {
        let (client, bases) = (client.clone(), bases.clone());
        common::drive(INTAKE_MESSAGES, CONNECTIONS, None, move |i| {
            let (client, bases, bodies) = (client.clone(), bases.clone(), bodies.clone());
            async move { common::post(&client, &bases[i % bases.len()], &bodies[i]).await }
        })
        .await
    };
    let after = Cpu::read(&servers);
    let mut counters = Vec::new();
    for s in &servers {
        counters.push(s.counter(&client, "balcao_inbound_received").await);
    }
    let stored: f64 = counters.iter().sum();
    let mut phase = Phase::measure(n, &before, &after, stats.elapsed, counters);
    phase.rate = stats.throughput();
    phase.latency = Some((stats.ms(0.5), stats.ms(0.99)));
    phase.note = format!("{stored:.0} stored of {distinct} distinct");
    for s in servers {
        s.stop().await;
    }
    common::drop_database(admin, &name).await;
    phase
}

async fn turns(admin: &sqlx::PgPool, server: &str, n: usize, model_url: &str) -> Phase {
    let name = format!("balcao_bench_scale_turns_{n}");
    let url = prepare(admin, server, &name).await;
    let settings = [
        ("AGENT", "anthropic".to_owned()),
        ("ANTHROPIC_API_KEY", "bench".to_owned()),
        ("ANTHROPIC_BASE_URL", model_url.to_owned()),
        ("BALCAO_DEBOUNCE_MS", "0".to_owned()),
        ("BALCAO_DEBOUNCE_MAX_MS", "0".to_owned()),
        ("BALCAO_POLL_INTERVAL_MS", "5".to_owned()),
        ("BALCAO_WORKERS", WORKERS.to_string()),
        ("BALCAO_DB_MAX_CONNECTIONS", POOL.to_string()),
    ];
    let servers = start(&url, n, &settings).await;
    let phone = spec().phone_number_id;
    let bodies: Arc<Vec<(Vec<u8>, String)>> = Arc::new(
        (0..TURNS)
            .map(|i| common::webhook(&phone, &format!("55119{i:08}"), &format!("wamid.turn.{i}"), "quais serviços?"))
            .collect(),
    );
    let client = reqwest::Client::new();
    let bases: Arc<Vec<String>> = Arc::new(servers.iter().map(|s| s.base.clone()).collect());
    let db = sqlx::PgPool::connect(&url).await.expect("pool");
    let before = Cpu::read(&servers);
    let started = Instant::now();
    let sent = Arc::new(AtomicUsize::new(0));
    let sender = {
        let (client, bases, sent) = (client.clone(), bases.clone(), sent.clone());
        tokio::spawn(common::drive(TURNS, CONNECTIONS, None, move |i| {
            let (client, bases, bodies, sent) = (client.clone(), bases.clone(), bodies.clone(), sent.clone());
            async move {
                common::post(&client, &bases[i % bases.len()], &bodies[i]).await;
                sent.fetch_add(1, Ordering::Relaxed);
            }
        }))
    };
    loop {
        let replies: i64 =
            sqlx::query_scalar("SELECT count(*) FROM outbound_messages").fetch_one(&db).await.expect("count");
        if replies as usize >= TURNS {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(300), "stuck at {replies} replies");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let elapsed = started.elapsed();
    let after = Cpu::read(&servers);
    sender.await.expect("sender");
    let mut counters = Vec::new();
    for s in &servers {
        counters.push(s.counter(&client, "balcao_jobs_completed").await);
    }
    let mut phase = Phase::measure(n, &before, &after, elapsed, counters);
    phase.rate = TURNS as f64 / elapsed.as_secs_f64();
    phase.note = format!("{:.1} ms per turn (wall)", elapsed.as_secs_f64() * 1000.0 / TURNS as f64);
    db.close().await;
    for s in servers {
        s.stop().await;
    }
    common::drop_database(admin, &name).await;
    phase
}

#[tokio::main]
async fn main() {
    let Ok(server) = std::env::var("BALCAO_BENCH_POSTGRES_URL") else {
        eprintln!("scale bench skipped: it needs PostgreSQL; set BALCAO_BENCH_POSTGRES_URL");
        return;
    };
    let admin = sqlx::PgPool::connect(&server).await.expect("postgres");
    let header = format!("{}; {}", common::machine(), common::postgres_settings(&admin).await);
    let model_url = common::fake_model().await;

    let mut intake_phases = Vec::new();
    for n in 1..=3 {
        intake_phases.push(intake(&admin, &server, n).await);
    }
    let mut turn_phases = Vec::new();
    for n in 1..=3 {
        turn_phases.push(turns(&admin, &server, n, &model_url).await);
    }

    let mut table = String::from(
        "| phase | processes | rate /s | vs 1 process | p50 / p99 ms | per process (counter, CPU) | server CPU ms per item (vs 1) | load generator cores | PostgreSQL cores | machine busy | notes |\n|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for phase in &intake_phases {
        table += &phase.row("intake, msgs", "stored", &intake_phases[0]);
    }
    for phase in &turn_phases {
        table += &phase.row(&format!("turns, {WORKERS} workers each"), "turns", &turn_phases[0]);
    }
    println!("\n{header}\n\n{table}");
}
