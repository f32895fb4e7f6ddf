//! `chaos`: the fault-injection campaign. Real server processes (this binary as `chaos __serve`,
//! the same `App` as `balcao serve`), one real database, and loopback fakes for the model, the
//! Graph API and the Pix provider; each run plays a randomized script with faults and checks
//! the invariants from the database and the fakes' own records.
//!
//! ```text
//! cargo run --release --bin chaos -- --runs 1000 --db postgres --processes 3 [--seed S]
//! ```
//!
//! Run `i` of a campaign with seed `S` has seed `S + i`; a violation prints the command that
//! replays its run alone (the same script and fault plan; thread timing differs).

mod cluster;
mod db;
mod faults;
mod graph;
mod invariants;
mod meta;
mod model;
mod psp;
mod rng;
mod run;
mod sabotage;

use std::collections::BTreeMap;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::{Parser, ValueEnum};
use futures::StreamExt;

use crate::cluster::Cluster;
use crate::db::Db;
use crate::faults::{Fault, Faults};
use crate::meta::Meta;
use crate::psp::fake_asaas::{API_KEY, FakeAsaas, WEBHOOK_TOKEN};
use crate::run::Ctx;

/// The servers' job and ledger leases: the shortest the configuration allows, so a frozen or
/// killed process is taken over within a run.
const LEASE: Duration = Duration::from_secs(3);
/// How long a run may take to settle once its script is played.
const SETTLE: Duration = Duration::from_secs(60);

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Backend {
    Sqlite,
    Postgres,
}

#[derive(Parser)]
#[command(about = "Fault-injection campaign against real balcao processes")]
struct Args {
    /// How many runs.
    #[arg(long, default_value_t = 100)]
    runs: u64,
    #[arg(long, value_enum, default_value = "sqlite")]
    db: Backend,
    /// The campaign's seed (default: from the clock).
    #[arg(long)]
    seed: Option<u64>,
    /// Server processes sharing the database (PostgreSQL only for more than one).
    #[arg(long, default_value_t = 1)]
    processes: usize,
    /// Runs in flight at once (each its own business).
    #[arg(long, default_value_t = 3)]
    parallel: usize,
    /// The PostgreSQL server; the campaign creates and drops a database of its own on it.
    #[arg(long, env = "BALCAO_TEST_POSTGRES_URL", default_value = "postgres://postgres@127.0.0.1:5432/test")]
    postgres_url: String,
    /// The share of model calls answered 429, 529 or 500.
    #[arg(long, default_value_t = 0.05)]
    model_error_rate: f64,
}

fn main() -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    if std::env::args().nth(1).as_deref() == Some("__serve") {
        return runtime.block_on(cluster::serve());
    }
    let args = Args::parse();
    if args.processes > 1 && matches!(args.db, Backend::Sqlite) {
        anyhow::bail!("--processes above 1 needs --db postgres (SQLite is one process's database)");
    }
    let ok = runtime.block_on(campaign(args))?;
    std::process::exit(if ok { 0 } else { 1 });
}

async fn campaign(args: Args) -> anyhow::Result<bool> {
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64)
    });
    let dir = std::env::temp_dir().join(format!("balcao-chaos-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let (url, admin) = database(&args, &dir).await?;
    let store = open_store(&url).await?;
    store.migrate().await.context("migrations")?;
    let db = Db::connect(&with_application_name(&url)).await?;

    let faults = Faults::default();
    let (graph, statuses) = graph::FakeGraph::start().await?;
    let model = model::FakeModel::start(seed, args.model_error_rate, faults.clone()).await?;
    let asaas = Arc::new(FakeAsaas::start().await);
    let env = server_env(&url, &graph.url, &model.url);
    let cluster = Arc::new(Cluster::start(args.processes, env, dir.clone()).await?);
    let meta = Arc::new(Meta::new(cluster.clone(), seed)?);
    tokio::spawn(report_statuses(meta.clone(), statuses, faults.clone(), seed));
    let ctx = Ctx { meta, graph, model, asaas, store, db, faults, http: reqwest::Client::new() };

    println!(
        "chaos: {} runs on {:?} with {} process(es), {} at once, seed {seed}",
        args.runs, args.db, args.processes, args.parallel
    );
    let started = Instant::now();
    let replay = |run_seed: u64| {
        format!(
            "cargo run --release --bin chaos -- --runs 1 --db {} --processes {} --seed {run_seed}",
            format!("{:?}", args.db).to_lowercase(),
            args.processes
        )
    };
    let mut failed = 0u64;
    let mut done = 0u64;
    let mut results = futures::stream::iter(0..args.runs)
        .map(|i| {
            let ctx = &ctx;
            let cluster = &cluster;
            async move {
                let start = Instant::now();
                (i, one_run(ctx, cluster, i, seed.wrapping_add(i)).await, start.elapsed())
            }
        })
        .buffer_unordered(args.parallel.max(1));
    let mut durations = Vec::new();
    while let Some((i, result, took)) = results.next().await {
        done += 1;
        durations.push(took);
        let violations = result.unwrap_or_else(|e| vec![format!("the run itself failed: {e:#}")]);
        if !violations.is_empty() {
            failed += 1;
            println!("VIOLATION in run {i} (seed {}):", seed.wrapping_add(i));
            for v in &violations {
                println!("  - {v}");
            }
            println!("  replay: {}", replay(seed.wrapping_add(i)));
        }
        if done.is_multiple_of(100) {
            println!("  {done} runs, {failed} with violations, {:.0} s", started.elapsed().as_secs_f64());
        }
    }
    drop(results);
    let elapsed = started.elapsed();
    cluster.shutdown().await;
    report(&args, seed, (done, failed), elapsed, &mut durations, &ctx.faults.snapshot());
    ctx.store.close().await;
    if let Some((admin, name)) = admin {
        let _ = sqlx::query(sqlx::AssertSqlSafe(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")))
            .execute(&admin)
            .await;
    }
    if failed == 0 {
        let _ = std::fs::remove_dir_all(&dir);
    } else {
        println!("server logs: {}", dir.display());
    }
    Ok(failed == 0)
}

async fn one_run(ctx: &Ctx, cluster: &Cluster, index: u64, seed: u64) -> anyhow::Result<Vec<String>> {
    let sabotage = sabotage::Sabotage { cluster, db: &ctx.db, faults: &ctx.faults, lease: LEASE };
    let plan = rng::Rng::new(seed ^ 0x5AB0_7A6E);
    let (cast, sabotaged) = futures::future::join(run::play(ctx, index, seed), sabotage.play(plan)).await;
    sabotaged?;
    let cast = cast?;
    let mut violations = Vec::new();
    if let Some(stuck) = invariants::settle(ctx, &cast, SETTLE).await? {
        violations.push(stuck);
    }
    let acked = ctx.meta.take_acked(&cast.number);
    violations.extend(invariants::check(ctx, &cast, &acked).await?);
    ctx.graph.forget(&cast.number);
    Ok(violations)
}

/// Meta's `sent` status for every accepted message, after a short delay, sometimes twice.
async fn report_statuses(
    meta: Arc<Meta>,
    mut statuses: tokio::sync::mpsc::UnboundedReceiver<graph::StatusNote>,
    faults: Faults,
    seed: u64,
) {
    let mut rng = rng::Rng::new(seed ^ 0x57A7);
    while let Some((number, wamid, to, key)) = statuses.recv().await {
        let (delay, twice) = (rng.below(200), rng.chance(0.1));
        if twice {
            faults.add(Fault::DuplicateStatus);
        }
        let meta = meta.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(delay)).await;
            let body = meta::status(&number, &wamid, &to, key.as_deref());
            meta.deliver(&body).await;
            if twice {
                meta.deliver(&body).await;
            }
        });
    }
}

/// The campaign's database URL, and for PostgreSQL the admin pool and name to drop it with.
async fn database(args: &Args, dir: &std::path::Path) -> anyhow::Result<(String, Option<(sqlx::PgPool, String)>)> {
    match args.db {
        Backend::Sqlite => Ok((format!("sqlite://{}?mode=rwc", dir.join("chaos.db").display()), None)),
        Backend::Postgres => {
            let admin = sqlx::PgPool::connect(&args.postgres_url)
                .await
                .with_context(|| format!("PostgreSQL at {}", args.postgres_url))?;
            let name = format!("balcao_chaos_{}", std::process::id());
            sqlx::query(sqlx::AssertSqlSafe(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")))
                .execute(&admin)
                .await?;
            sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}"))).execute(&admin).await?;
            let base = args.postgres_url.rsplit_once('/').map_or(args.postgres_url.as_str(), |(b, _)| b);
            Ok((format!("{base}/{name}"), Some((admin, name))))
        }
    }
}

/// The campaign's own connections are named, so killing the servers' connections spares them.
fn with_application_name(url: &str) -> String {
    if url.starts_with("postgres") { format!("{url}?application_name=chaos") } else { url.to_owned() }
}

async fn open_store(url: &str) -> anyhow::Result<balcao::store::Store> {
    let store = if url.starts_with("postgres") {
        let options = sqlx::postgres::PgConnectOptions::from_str(url)?.application_name("chaos");
        balcao::store::Store::connect_postgres(options, 4).await?
    } else {
        balcao::store::Store::connect_sqlite(sqlx::sqlite::SqliteConnectOptions::from_str(url)?, 4).await?
    };
    Ok(store)
}

fn server_env(database_url: &str, graph: &str, model: &str) -> Vec<(String, String)> {
    let lease = LEASE.as_secs().to_string();
    [
        ("DATABASE_URL", database_url),
        ("WHATSAPP_APP_SECRET", meta::APP_SECRET),
        ("WHATSAPP_ACCESS_TOKEN", "chaos-access-token"),
        ("WHATSAPP_API_URL", graph),
        ("AGENT", "anthropic"),
        ("ANTHROPIC_API_KEY", "chaos-model-key"),
        ("ANTHROPIC_BASE_URL", model),
        ("ASAAS_API_KEY", API_KEY),
        ("ASAAS_WEBHOOK_TOKEN", WEBHOOK_TOKEN),
        ("BALCAO_DEBOUNCE_MS", "0"),
        ("BALCAO_POLL_INTERVAL_MS", "25"),
        ("BALCAO_JOB_LEASE_SECONDS", &lease),
        ("BALCAO_LEDGER_LEASE_SECONDS", &lease),
        ("BALCAO_JOB_BACKOFF_BASE_MS", "50"),
        ("BALCAO_JOB_BACKOFF_MAX_SECONDS", "1"),
        ("BALCAO_JOB_MAX_ATTEMPTS", "10"),
        ("BALCAO_HTTP_TIMEOUT_SECONDS", "1"),
        ("BALCAO_LLM_TIMEOUT_SECONDS", "2"),
        // Longer than any outage a run injects (a frozen process, a restart): a send whose
        // outcome is unknown is sent again only when Meta's status did not come within it.
        ("BALCAO_OUTBOX_GRACE_SECONDS", "20"),
        ("BALCAO_SHUTDOWN_GRACE_SECONDS", "5"),
        ("BALCAO_DB_MAX_CONNECTIONS", "8"),
        ("RUST_LOG", "error"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

fn report(
    args: &Args,
    seed: u64,
    (runs, failed): (u64, u64),
    elapsed: Duration,
    durations: &mut [Duration],
    faults: &BTreeMap<Fault, u64>,
) {
    durations.sort();
    let at = |q: f64| durations.get(((durations.len() as f64 * q) as usize).min(durations.len().saturating_sub(1)));
    let secs = |d: Option<&Duration>| d.map_or(0.0, Duration::as_secs_f64);
    println!("\n| campaign | value |\n|---|---|");
    println!("| database | {:?}, {} process(es), {} runs at once |", args.db, args.processes, args.parallel);
    println!("| seed | {seed} |");
    println!("| runs | {runs} |");
    println!("| runs with a violation | {failed} |");
    println!("| duration | {:.0} s ({:.2} runs/s) |", elapsed.as_secs_f64(), runs as f64 / elapsed.as_secs_f64());
    println!(
        "| run duration | p50 {:.1} s, p90 {:.1} s, max {:.1} s |",
        secs(at(0.5)),
        secs(at(0.9)),
        secs(durations.last())
    );
    println!("\n| fault injected | count |\n|---|---|");
    for (fault, n) in faults {
        println!("| {fault:?} | {n} |");
    }
}
