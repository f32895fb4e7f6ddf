//! The server processes under test: `balcao` servers on fixed loopback ports, each a child
//! process that can be killed (SIGKILL), frozen (SIGSTOP/SIGCONT), stopped gracefully (SIGTERM)
//! and started again on the same port, so Meta's retries find it back.
//!
//! Each server is this binary run as `chaos __serve`, which runs the same `App` as
//! `balcao serve` from the same environment variables: `cargo run --bin chaos` builds only the
//! `chaos` binary, so a sibling `balcao` binary could be missing or stale.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, bail};
use tokio::process::{Child, Command};
use tokio::sync::Mutex;

/// Below Linux's ephemeral range (32768 and up), so no outgoing connection can hold a server's
/// port while it restarts.
const PORTS: std::ops::Range<u16> = 20_000..32_000;

pub struct Cluster {
    /// Fixed per server: Meta's retries find a restarted server where it was.
    ports: Vec<u16>,
    children: Vec<Mutex<Option<Child>>>,
    env: Vec<(String, String)>,
    dir: PathBuf,
    http: reqwest::Client,
}

impl Cluster {
    /// Starts `n` servers with `env` and waits until each is ready.
    pub async fn start(n: usize, env: Vec<(String, String)>, dir: PathBuf) -> anyhow::Result<Self> {
        let mut ports = Vec::new();
        let mut candidate = PORTS.start + (std::process::id() % 1_000) as u16 * 10;
        while ports.len() < n {
            candidate = if PORTS.contains(&(candidate + 1)) { candidate + 1 } else { PORTS.start };
            if std::net::TcpListener::bind(("127.0.0.1", candidate)).is_ok() {
                ports.push(candidate);
            }
        }
        let children = (0..n).map(|_| Mutex::new(None)).collect();
        let http = reqwest::Client::builder().timeout(Duration::from_secs(2)).build()?;
        let cluster = Self { ports, children, env, dir, http };
        for i in 0..n {
            cluster.restart(i).await?;
        }
        Ok(cluster)
    }

    pub fn len(&self) -> usize {
        self.ports.len()
    }

    pub fn url(&self, i: usize) -> String {
        format!("http://127.0.0.1:{}", self.ports[i])
    }

    /// Starts server `i` (if it is not running) and waits until it answers `/readyz`.
    pub async fn restart(&self, i: usize) -> anyhow::Result<()> {
        let port = self.ports[i];
        let mut slot = self.children[i].lock().await;
        if let Some(child) = slot.as_mut()
            && child.try_wait()?.is_none()
        {
            return Ok(());
        }
        for _attempt in 0..20 {
            let log = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(self.dir.join(format!("server-{i}.log")))
                .context("server log")?;
            let mut command = Command::new(std::env::current_exe()?);
            command
                .arg("__serve")
                .current_dir(&self.dir)
                .env("BALCAO_ADDR", format!("127.0.0.1:{port}"))
                .stdin(Stdio::null())
                // The server logs to stdout; panics and early failures go to stderr.
                .stdout(log.try_clone().context("server log")?)
                .stderr(log)
                .kill_on_drop(true);
            for (name, value) in &self.env {
                command.env(name, value);
            }
            let mut child = command.spawn().context("start a server")?;
            let url = format!("http://127.0.0.1:{port}/readyz");
            for _ in 0..400 {
                if child.try_wait()?.is_some() {
                    break;
                }
                if self.http.get(&url).send().await.is_ok_and(|r| r.status().is_success()) {
                    *slot = Some(child);
                    return Ok(());
                }
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
            // It exited (its port was still held, say) or never became ready: try again.
            let _ = child.kill().await;
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        bail!("server {i} did not start; see {}", self.dir.join(format!("server-{i}.log")).display())
    }

    /// SIGKILL: no shutdown, no flush, leases left to expire. False if it was not running.
    pub async fn kill(&self, i: usize) -> bool {
        let mut slot = self.children[i].lock().await;
        match slot.take() {
            Some(mut child) => {
                let _ = child.kill().await;
                true
            }
            None => false,
        }
    }

    /// SIGKILL of every server, then each started again.
    pub async fn kill_all(&self) -> anyhow::Result<()> {
        for i in 0..self.len() {
            self.kill(i).await;
        }
        for i in 0..self.len() {
            self.restart(i).await?;
        }
        Ok(())
    }

    /// SIGSTOP (`frozen`) or SIGCONT: the process keeps its sockets and leases but does nothing.
    pub async fn freeze(&self, i: usize, frozen: bool) {
        let slot = self.children[i].lock().await;
        signal(slot.as_ref(), if frozen { "STOP" } else { "CONT" }).await;
    }

    /// SIGTERM and wait for the graceful exit (SIGKILL after `grace`).
    pub async fn terminate(&self, i: usize, grace: Duration) {
        let mut slot = self.children[i].lock().await;
        // Another run may have frozen it: a stopped process cannot act on SIGTERM.
        signal(slot.as_ref(), "CONT").await;
        signal(slot.as_ref(), "TERM").await;
        if let Some(mut child) = slot.take()
            && tokio::time::timeout(grace, child.wait()).await.is_err()
        {
            let _ = child.kill().await;
        }
    }

    pub async fn shutdown(&self) {
        for i in 0..self.len() {
            self.freeze(i, false).await;
            self.kill(i).await;
        }
    }
}

/// Sends signal `name` to `child`; called with its slot locked, so the pid is not a reaped one.
async fn signal(child: Option<&Child>, name: &str) {
    if let Some(pid) = child.and_then(Child::id) {
        let _ = Command::new("kill").arg(format!("-{name}")).arg(pid.to_string()).status().await;
    }
}

/// Runs this process as a server (`chaos __serve`): what `balcao serve` does outside local mode.
pub async fn serve() -> anyhow::Result<()> {
    let config = balcao::config::Config::from_env()?;
    balcao::telemetry::init(config.log_format);
    let store = balcao::store::Store::connect(&config.database_url, config.pool_size()).await?;
    store.migrate().await?;
    let app = balcao::app::App::build(config, store).await?;
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    app.run_until_stopped(async move {
        terminate.recv().await;
    })
    .await
}
