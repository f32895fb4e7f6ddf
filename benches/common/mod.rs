//! Helpers shared by the benches that drive the server over HTTP: the real `balcao` binary as a child
//! process, signed webhooks, a load driver, a loopback model, `/proc` readings and throwaway
//! PostgreSQL databases.
//!
//! Each bench includes this file with `#[path]` and uses a subset, hence `dead_code` allowed.
#![allow(dead_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

pub const SECRET: &str = "bench-secret";

/// A signed one-message text webhook for `phone_number_id`, as Meta sends it.
pub fn webhook(phone_number_id: &str, from: &str, wamid: &str, body: &str) -> (Vec<u8>, String) {
    let body = serde_json::to_vec(&serde_json::json!({
        "object": "whatsapp_business_account",
        "entry": [{ "id": "102290129340398", "changes": [{ "field": "messages", "value": {
            "messaging_product": "whatsapp",
            "metadata": { "display_phone_number": "15550783881", "phone_number_id": phone_number_id },
            "contacts": [{ "profile": { "name": "Cliente" }, "wa_id": from }],
            "messages": [{ "from": from, "id": wamid, "timestamp": "1749416383", "type": "text",
                           "text": { "body": body } }]
        }}]}]
    }))
    .expect("json");
    let signature = balcao::whatsapp::signature::sign(SECRET.as_bytes(), &body);
    (body, signature)
}

/// POSTs a signed webhook and expects 200.
pub async fn post(client: &reqwest::Client, base: &str, (body, signature): &(Vec<u8>, String)) {
    let response = client
        .post(format!("{base}/webhooks/whatsapp"))
        .header("content-type", "application/json")
        .header("x-hub-signature-256", signature)
        .body(body.clone())
        .send()
        .await
        .expect("post");
    assert_eq!(response.status(), 200);
}

/// One `balcao` server process on a loopback port.
pub struct Server {
    pub child: tokio::process::Child,
    pub pid: u32,
    pub base: String,
    /// Where it runs: its current directory, removed on drop.
    _dir: tempfile::TempDir,
}

impl Server {
    /// Starts the binary against `database_url` with `settings` and waits until it is ready.
    pub async fn start(database_url: &str, settings: &[(&str, String)]) -> Server {
        let port = std::net::TcpListener::bind("127.0.0.1:0").expect("port").local_addr().expect("addr").port();
        let dir = tempfile::tempdir().expect("dir");
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_balcao"));
        command
            .current_dir(dir.path())
            .env("DATABASE_URL", database_url)
            .env("BALCAO_ADDR", format!("127.0.0.1:{port}"))
            .env("WHATSAPP_APP_SECRET", SECRET)
            .env("RUST_LOG", "warn")
            .kill_on_drop(true);
        for (name, value) in settings {
            command.env(name, value);
        }
        let child = command.spawn().expect("start server");
        let pid = child.id().expect("pid");
        let base = format!("http://127.0.0.1:{port}");
        let client = reqwest::Client::new();
        for _ in 0..400 {
            if client.get(format!("{base}/readyz")).send().await.is_ok_and(|r| r.status().is_success()) {
                return Server { child, pid, base, _dir: dir };
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("server on {base} not ready after 20 s");
    }

    /// A counter's value from `/metrics` (`name` without the `_total` suffix).
    pub async fn counter(&self, client: &reqwest::Client, name: &str) -> f64 {
        let text =
            client.get(format!("{}/metrics", self.base)).send().await.expect("metrics").text().await.expect("text");
        let wanted = format!("{name}_total ");
        text.lines().find_map(|l| l.strip_prefix(&wanted)).and_then(|v| v.trim().parse().ok()).unwrap_or(0.0)
    }

    pub async fn stop(mut self) {
        self.child.kill().await.expect("stop server");
    }
}

/// Latencies and wall time of a run of requests.
pub struct Stats {
    pub count: usize,
    pub elapsed: Duration,
    pub latencies: Vec<Duration>,
}

impl Stats {
    pub fn throughput(&self) -> f64 {
        self.count as f64 / self.elapsed.as_secs_f64()
    }

    /// The `p` quantile in milliseconds.
    pub fn ms(&self, p: f64) -> f64 {
        let mut sorted = self.latencies.clone();
        sorted.sort();
        sorted[((sorted.len() as f64 * p) as usize).min(sorted.len() - 1)].as_secs_f64() * 1000.0
    }
}

/// Runs `op(0..count)` from `connections` tasks, each operation as soon as the last one ended,
/// or paced at `rate` per second; a paced operation's latency counts from its scheduled start,
/// so a stalled server cannot hide queueing (no coordinated omission).
pub async fn drive<F, Fut>(count: usize, connections: usize, rate: Option<usize>, op: F) -> Stats
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let op = Arc::new(op);
    let next = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..connections {
        let (op, next) = (op.clone(), next.clone());
        tasks.spawn(async move {
            let mut latencies = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= count {
                    return latencies;
                }
                let scheduled = match rate {
                    Some(r) => {
                        let at = start + Duration::from_secs_f64(i as f64 / r as f64);
                        tokio::time::sleep_until(at.into()).await;
                        at
                    }
                    None => Instant::now(),
                };
                op(i).await;
                latencies.push(scheduled.elapsed());
            }
        });
    }
    let mut latencies = Vec::with_capacity(count);
    while let Some(l) = tasks.join_next().await {
        latencies.extend(l.expect("task"));
    }
    Stats { count, elapsed: start.elapsed(), latencies }
}

/// A zero-latency loopback Anthropic model: a request without a tool result gets a
/// `list_services` call, the rest a text answer (two model calls per turn). Returns its URL.
pub async fn fake_model() -> String {
    use axum::Json;
    use serde_json::{Value, json};
    async fn model(Json(body): Json<Value>) -> Json<Value> {
        let last = body["messages"].as_array().and_then(|m| m.last()).cloned().unwrap_or(Value::Null);
        let answered = last["content"].as_array().is_some_and(|c| c.iter().any(|b| b["type"] == "tool_result"));
        Json(if answered {
            json!({ "content": [{ "type": "text", "text": "Temos corte e barba." }], "stop_reason": "end_turn", "usage": {} })
        } else {
            json!({ "content": [{ "type": "tool_use", "id": "toolu_1", "name": "list_services", "input": {} }], "stop_reason": "tool_use", "usage": {} })
        })
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(async move {
        let app = axum::Router::new().route("/v1/messages", axum::routing::post(model));
        let _ = axum::serve(listener, app).await;
    });
    url
}

/// A `kB` field of `/proc/<pid>/status` (`VmRSS:`, `VmHWM:`), in MB.
pub fn status_mb(pid: u32, field: &str) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with(field)).map(str::to_owned))
        .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse::<f64>().ok()))
        .map_or(0.0, |kb| kb / 1024.0)
}

/// The fields of `/proc/<pid>/stat` after the command name (which may hold spaces).
fn stat_fields(pid: &str) -> Option<(String, Vec<u64>)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (head, tail) = text.rsplit_once(')')?;
    let name = head.split_once('(')?.1.to_owned();
    // Field 3 (state) is not a number: keep its place so indices match `man proc` minus 3.
    let fields = tail.split_whitespace().skip(1).map(|f| f.parse().unwrap_or(0)).collect();
    Some((name, fields))
}

/// Clock ticks per second (`getconf CLK_TCK`; 100 on Linux in practice).
pub fn clock_ticks() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

/// CPU seconds (user + system) a process has used so far; `pid` may be `"self"`.
pub fn cpu_seconds(pid: &str) -> f64 {
    // utime and stime are fields 14 and 15.
    stat_fields(pid).map_or(0.0, |(_, f)| (f[10] + f[11]) as f64 / clock_ticks())
}

/// CPU seconds of every `postgres` process, including backends that have exited (the
/// postmaster reaps them, so their time is in its children's fields 16 and 17).
pub fn postgres_cpu_seconds() -> f64 {
    let ticks: u64 = std::fs::read_dir("/proc")
        .expect("/proc")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|name| name.bytes().all(|b| b.is_ascii_digit()))
        .filter_map(|pid| stat_fields(&pid))
        .filter(|(name, _)| name == "postgres")
        .map(|(_, f)| f[10] + f[11] + f[12] + f[13])
        .sum();
    ticks as f64 / clock_ticks()
}

/// Busy and total CPU seconds of the whole machine so far (first line of `/proc/stat`).
pub fn machine_cpu_seconds() -> (f64, f64) {
    let text = std::fs::read_to_string("/proc/stat").expect("/proc/stat");
    let fields: Vec<u64> =
        text.lines().next().expect("cpu line").split_whitespace().skip(1).map(|f| f.parse().unwrap_or(0)).collect();
    let total: u64 = fields.iter().take(8).sum();
    // idle and iowait are fields 4 and 5.
    let busy = total - fields[3] - fields[4];
    (busy as f64 / clock_ticks(), total as f64 / clock_ticks())
}

/// Where the benches run: date, cores and memory.
pub fn machine() -> String {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let memory = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| m.lines().next().and_then(|l| l.split_whitespace().nth(1)).and_then(|kb| kb.parse::<f64>().ok()))
        .map_or(0.0, |kb| kb / 1024.0 / 1024.0);
    format!("{} UTC, {cores} cores, {memory:.1} GiB", chrono::Utc::now().format("%Y-%m-%d %H:%M"))
}

/// PostgreSQL's version and the settings that decide a commit's cost.
pub async fn postgres_settings(admin: &sqlx::PgPool) -> String {
    let mut out = Vec::new();
    for setting in ["server_version", "fsync", "synchronous_commit", "max_connections"] {
        let value: String =
            sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SHOW {setting}"))).fetch_one(admin).await.expect("show");
        out.push(format!("{setting} = {value}"));
    }
    format!("PostgreSQL: {}", out.join(", "))
}

/// Drops and creates the database `name` on the server of `admin`; returns its URL.
pub async fn fresh_database(admin: &sqlx::PgPool, server_url: &str, name: &str) -> String {
    sqlx::query(sqlx::AssertSqlSafe(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")))
        .execute(admin)
        .await
        .expect("drop");
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}"))).execute(admin).await.expect("create");
    let base = server_url.rsplit_once('/').map(|(b, _)| b.to_owned()).expect("url with a database");
    format!("{base}/{name}")
}

/// Drops a bench database once its servers are stopped.
pub async fn drop_database(admin: &sqlx::PgPool, name: &str) {
    sqlx::query(sqlx::AssertSqlSafe(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")))
        .execute(admin)
        .await
        .expect("drop");
}

/// Gathers the planner's statistics on the database at `url`. This host's PostgreSQL runs with
/// autovacuum off; without statistics, the generic plan a pooled connection caches while a
/// table is nearly empty can pick the wrong index and stay with it (production's autovacuum
/// analyzes within a minute, which also replaces cached plans). Benches warm up, then call this
/// before the clock starts.
pub async fn analyze(url: &str) {
    if url.starts_with("postgres") {
        let pool = sqlx::PgPool::connect(url).await.expect("postgres");
        sqlx::query("ANALYZE").execute(&pool).await.expect("analyze");
        pool.close().await;
    } else {
        let pool = sqlx::SqlitePool::connect(url).await.expect("sqlite");
        sqlx::query("ANALYZE").execute(&pool).await.expect("analyze");
        pool.close().await;
    }
}

/// Waits until every job is completed.
pub async fn jobs_finished(url: &str) {
    while unfinished(url).await > 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Jobs not yet completed (read on a connection of its own, which commits nothing).
async fn unfinished(url: &str) -> i64 {
    const SQL: &str = "SELECT COUNT(*) FROM jobs WHERE state <> 'completed'";
    if url.starts_with("sqlite:") {
        let pool = sqlx::SqlitePool::connect(url).await.expect("sqlite");
        let n = sqlx::query_scalar(SQL).fetch_one(&pool).await.expect("jobs");
        pool.close().await;
        n
    } else {
        let pool = sqlx::PgPool::connect(url).await.expect("postgres");
        let n = sqlx::query_scalar(SQL).fetch_one(&pool).await.expect("jobs");
        pool.close().await;
        n
    }
}

/// The database's count of committed write transactions so far:
/// - PostgreSQL: the transaction id counter (`pg_current_xact_id()`). An id is assigned only to
///   a transaction that writes, so read-only statements do not count (they do in
///   `pg_stat_database.xact_commit`), and neither do statements that matched nothing (an idle
///   claim). Each probe takes one id itself: subtract one per probe. The counter is the
///   cluster's: run the bench while nothing else writes to that server.
/// - SQLite: SQLite's commit hook on the store's single writer connection
///   (`Store::sqlite_commits`), which SQLite calls for write transactions only, autocommitted
///   statements included.
pub async fn commits(store: &balcao::store::Store, url: &str) -> u64 {
    if let Some(n) = store.sqlite_commits() {
        return n;
    }
    let pool = sqlx::PgPool::connect(url).await.expect("postgres");
    let xid: String = sqlx::query_scalar("SELECT pg_current_xact_id()::text").fetch_one(&pool).await.expect("xid");
    pool.close().await;
    xid.parse().expect("a transaction id")
}
