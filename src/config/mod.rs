//! Typed settings from the environment (and `.env`), validated once at start.
//!
//! Every variable is documented in `.env.example`. Secrets live in [`Secret`], whose `Debug`
//! never shows the value, and a database URL prints without its password.

mod limits;
mod reader;
mod sections;
#[cfg(test)]
mod tests;

pub use sections::{
    AgentConfig, AgentKind, DEFAULT_TRANSCRIPTION_MODEL, IntakeConfig, LedgerConfig, LogFormat, OutboxConfig,
    PixSecrets, QueueConfig, TranscriptionConfig, WhatsAppConfig,
};

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use limits::*;
use reader::Reader;

use crate::domain::{DatabaseUrl, PrivacyKey, Secret};

/// Where the Graph API lives; the version is part of the URL so operators can move it.
pub const DEFAULT_WHATSAPP_API_URL: &str = "https://graph.facebook.com/v25.0";
pub const DEFAULT_DATABASE_URL: &str = "sqlite://./data/balcao.db";
pub const DEFAULT_ADDR: &str = "127.0.0.1:8080";
/// Used only in local mode (no `WHATSAPP_APP_SECRET`): nothing leaves the machine, and the
/// `balcao chat` client signs its payloads with the same value.
pub const LOCAL_DEV_APP_SECRET: &str = "balcao-local-development-secret";

#[derive(Debug, Clone)]
pub struct Config {
    pub database_url: DatabaseUrl,
    /// Opens the simulator API (`/simulator/api`) outside local mode on a loopback address.
    pub admin_token: Option<Secret>,
    /// `BALCAO_TRUSTED_PROXY_HEADER`: the header (e.g. `X-Forwarded-For`) a reverse proxy in
    /// front of us writes the client's address to; its last address is taken as the source of
    /// a console login. Unset, the peer address is the source (the header is anyone's to forge).
    pub trusted_proxy_header: Option<String>,
    /// The server's public https address, for the URLs registered with providers
    /// (`balcao pix webhook-url`).
    pub public_url: Option<String>,
    /// Where the Pix providers' secrets named in tenant files are read: the environment,
    /// unless a test or a tool puts others here.
    pub pix_secrets: PixSecrets,
    pub db_max_connections: u32,
    pub addr: SocketAddr,
    pub whatsapp: WhatsAppConfig,
    pub queue: QueueConfig,
    pub intake: IntakeConfig,
    pub outbox: OutboxConfig,
    pub ledger: LedgerConfig,
    pub agent: AgentConfig,
    /// `BALCAO_TRANSCRIPTION_URL` and friends: where voice notes are transcribed; without it,
    /// a voice note is answered with a request to write.
    pub transcription: Option<TranscriptionConfig>,
    pub shutdown_grace: Duration,
    pub log_format: LogFormat,
    /// `BALCAO_HANDOFF_IDLE_MINUTES`: a conversation a person took over stays with them until
    /// this long passes without a message from either side; then the bot answers again.
    pub handoff_idle: Duration,
}

/// All problems found, reported together so an operator fixes them in one go.
#[derive(Debug, thiserror::Error)]
#[error("invalid configuration:\n{}", .0.iter().map(|p| format!("  - {p}")).collect::<Vec<_>>().join("\n"))]
pub struct ConfigError(pub Vec<String>);

impl Config {
    /// The database pool's size: `BALCAO_DB_MAX_CONNECTIONS`, raised when needed to hold every
    /// worker and outbox sender at once plus the intake's writers and two more (the sweeps,
    /// each a statement at a time, and the replay counts' flush). A unit of work keeps its
    /// connection across its outside calls (`store::unit`), so fewer would leave the rest
    /// waiting on the pool. The console has connections of its own besides
    /// (`http::CONSOLE_CONNECTIONS`): a process opens up to this plus those, which PostgreSQL's
    /// `max_connections` must allow for every process of a deployment.
    pub fn pool_size(&self) -> u32 {
        let held = self.queue.workers + self.outbox.senders + self.intake.writers + 2;
        self.db_max_connections.max(u32::try_from(held).unwrap_or(u32::MAX))
    }

    /// Reads the process environment (after `.env`, which `main` loads).
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_vars(&std::env::vars().collect())
    }

    pub fn from_vars(vars: &HashMap<String, String>) -> Result<Self, ConfigError> {
        let mut r = Reader { vars, problems: Vec::new() };

        let database_url =
            DatabaseUrl::new(r.string("DATABASE_URL").unwrap_or_else(|| DEFAULT_DATABASE_URL.to_owned()));
        if !database_url.is_postgres() && !database_url.is_sqlite() {
            r.problems.push(format!("DATABASE_URL={database_url} must start with sqlite: or postgres://"));
        }
        let admin_token = r.string("BALCAO_ADMIN_TOKEN").map(Secret::new);
        let trusted_proxy_header = r.string("BALCAO_TRUSTED_PROXY_HEADER").map(|h| h.to_ascii_lowercase());
        if let Some(h) = &trusted_proxy_header
            && !h.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        {
            r.problems.push(format!("BALCAO_TRUSTED_PROXY_HEADER={h:?} is not a header name"));
        }
        let public_url = r.string("BALCAO_PUBLIC_URL");
        let addr = r.parsed("BALCAO_ADDR", default_addr(), "a socket address like 127.0.0.1:8080");
        let db_max_connections = r.bounded("BALCAO_DB_MAX_CONNECTIONS", 16, DB_MAX_CONNECTIONS, "connections") as u32;

        let access_token = r.string("WHATSAPP_ACCESS_TOKEN").map(Secret::new);
        let app_secret = r.string("WHATSAPP_APP_SECRET").map(Secret::new);
        if access_token.is_some() && app_secret.is_none() {
            r.problems.push(
                "WHATSAPP_APP_SECRET is required when WHATSAPP_ACCESS_TOKEN is set \
                 (App Dashboard > App settings > Basic > App secret)"
                    .to_owned(),
            );
        }
        let local_mode = app_secret.is_none();
        let api_url = r
            .string("WHATSAPP_API_URL")
            .unwrap_or_else(|| DEFAULT_WHATSAPP_API_URL.to_owned())
            .trim_end_matches('/')
            .to_owned();
        if !(api_url.starts_with("http://") || api_url.starts_with("https://")) {
            r.problems.push(format!("WHATSAPP_API_URL={api_url:?} must be an http(s) URL"));
        }
        let app_secret = app_secret.unwrap_or_else(|| Secret::new(LOCAL_DEV_APP_SECRET));
        let privacy_key =
            PrivacyKey::derive(&r.string("BALCAO_PRIVACY_KEY").map_or_else(|| app_secret.clone(), Secret::new));
        let whatsapp = WhatsAppConfig {
            app_secret,
            privacy_key,
            local_mode,
            local_mode_public: r.flag("BALCAO_LOCAL_MODE_PUBLIC"),
            verify_token: r.string("WHATSAPP_VERIFY_TOKEN").map(Secret::new),
            access_token,
            api_url,
        };

        let lease = Duration::from_secs(r.bounded("BALCAO_JOB_LEASE_SECONDS", 60, JOB_LEASE_SECONDS, "seconds"));
        let debounce = Duration::from_millis(r.bounded("BALCAO_DEBOUNCE_MS", 2000, DEBOUNCE_MS, "milliseconds"));
        let debounce_max =
            Duration::from_millis(r.bounded("BALCAO_DEBOUNCE_MAX_MS", 10_000, DEBOUNCE_MAX_MS, "milliseconds"));
        let workers = r.bounded("BALCAO_WORKERS", 4, WORKERS, "workers") as usize;
        let intake = IntakeConfig {
            batch_max: r.bounded("BALCAO_INTAKE_BATCH_MAX", 64, INTAKE_BATCH_MAX, "writes") as usize,
            batch_window: Duration::from_millis(r.bounded(
                "BALCAO_INTAKE_BATCH_WINDOW_MS",
                0,
                INTAKE_BATCH_WINDOW_MS,
                "milliseconds",
            )),
            writers: r.bounded("BALCAO_INTAKE_WRITERS", 4, INTAKE_WRITERS, "writers") as usize,
        };
        let queue = QueueConfig {
            lease,
            debounce,
            debounce_max,
            workers,
            max_attempts: r.bounded("BALCAO_JOB_MAX_ATTEMPTS", 5, MAX_ATTEMPTS, "attempts") as u32,
            backoff_base: Duration::from_millis(r.bounded(
                "BALCAO_JOB_BACKOFF_BASE_MS",
                1000,
                BACKOFF_BASE_MS,
                "milliseconds",
            )),
            backoff_max: Duration::from_secs(r.bounded(
                "BALCAO_JOB_BACKOFF_MAX_SECONDS",
                300,
                BACKOFF_MAX_SECONDS,
                "seconds",
            )),
            retention: Duration::from_secs(
                3600 * r.bounded("BALCAO_JOB_RETENTION_HOURS", 168, JOB_RETENTION_HOURS, "hours"),
            ),
            poll_interval: Duration::from_millis(r.bounded(
                "BALCAO_POLL_INTERVAL_MS",
                250,
                POLL_INTERVAL_MS,
                "milliseconds",
            )),
        };
        let outbox = OutboxConfig {
            grace: Duration::from_secs(r.bounded("BALCAO_OUTBOX_GRACE_SECONDS", 60, OUTBOX_GRACE_SECONDS, "seconds")),
            senders: r.bounded("BALCAO_OUTBOX_SENDERS", 4, OUTBOX_SENDERS, "senders") as usize,
            max_attempts: r.bounded("BALCAO_OUTBOX_MAX_ATTEMPTS", 8, MAX_ATTEMPTS, "attempts") as u32,
            http_timeout: Duration::from_secs(r.bounded(
                "BALCAO_HTTP_TIMEOUT_SECONDS",
                15,
                HTTP_TIMEOUT_SECONDS,
                "seconds",
            )),
        };
        let ledger = LedgerConfig {
            lease: Duration::from_secs(r.bounded("BALCAO_LEDGER_LEASE_SECONDS", 120, LEDGER_LEASE_SECONDS, "seconds")),
            retention: Duration::from_secs(
                86_400 * r.bounded("BALCAO_LEDGER_RETENTION_DAYS", 30, LEDGER_RETENTION_DAYS, "days"),
            ),
        };
        let anthropic_key = r.string("ANTHROPIC_API_KEY").map(Secret::new);
        let kind = match r.string("AGENT").as_deref() {
            Some("guided") => AgentKind::Guided,
            None if anthropic_key.is_none() => AgentKind::Guided,
            None | Some("anthropic") => match anthropic_key {
                Some(api_key) => AgentKind::Anthropic {
                    api_key,
                    model: r
                        .string("ANTHROPIC_MODEL")
                        .unwrap_or_else(|| crate::llm::anthropic::DEFAULT_MODEL.to_owned()),
                    base_url: r
                        .string("ANTHROPIC_BASE_URL")
                        .unwrap_or_else(|| crate::llm::anthropic::DEFAULT_BASE_URL.to_owned()),
                },
                None => {
                    r.problems.push("AGENT=anthropic needs ANTHROPIC_API_KEY".to_owned());
                    AgentKind::Guided
                }
            },
            Some("openai") => match r.string("OPENAI_MODEL") {
                Some(model) => AgentKind::OpenAi {
                    api_key: r.string("OPENAI_API_KEY").map(Secret::new),
                    model,
                    base_url: r
                        .string("OPENAI_BASE_URL")
                        .unwrap_or_else(|| crate::llm::openai::DEFAULT_BASE_URL.to_owned()),
                    parallel_tool_calls: r.parsed("OPENAI_PARALLEL_TOOL_CALLS_FLAG", true, "true or false"),
                },
                None => {
                    r.problems.push(
                        "AGENT=openai needs OPENAI_MODEL (and OPENAI_BASE_URL for Ollama, vLLM or OpenRouter)"
                            .to_owned(),
                    );
                    AgentKind::Guided
                }
            },
            Some(other) => {
                r.problems.push(format!("AGENT={other:?} must be guided, anthropic or openai"));
                AgentKind::Guided
            }
        };
        let agent = AgentConfig {
            kind,
            max_steps: r.bounded("BALCAO_AGENT_MAX_STEPS", 6, AGENT_MAX_STEPS, "steps") as u32,
            max_tokens: r.bounded("BALCAO_AGENT_MAX_TOKENS", 1024, AGENT_MAX_TOKENS, "tokens") as u32,
            history_turns: r.bounded("BALCAO_AGENT_HISTORY_TURNS", 20, AGENT_HISTORY_TURNS, "turns") as i64,
            history_budget_chars: r.bounded(
                "BALCAO_AGENT_HISTORY_BUDGET_CHARS",
                48_000,
                AGENT_HISTORY_BUDGET_CHARS,
                "characters",
            ) as usize,
            llm_timeout: Duration::from_secs(r.bounded(
                "BALCAO_LLM_TIMEOUT_SECONDS",
                90,
                LLM_TIMEOUT_SECONDS,
                "seconds",
            )),
        };
        let transcription_timeout =
            Duration::from_secs(r.bounded("BALCAO_TRANSCRIPTION_TIMEOUT_SECONDS", 30, HTTP_TIMEOUT_SECONDS, "seconds"));
        let transcription = r.string("BALCAO_TRANSCRIPTION_URL").map(|url| TranscriptionConfig {
            url,
            model: r.string("BALCAO_TRANSCRIPTION_MODEL").unwrap_or_else(|| DEFAULT_TRANSCRIPTION_MODEL.to_owned()),
            api_key: r.string("BALCAO_TRANSCRIPTION_API_KEY").map(Secret::new),
            timeout: transcription_timeout,
        });
        if let Some(t) = &transcription
            && !(t.url.starts_with("http://") || t.url.starts_with("https://"))
        {
            r.problems.push(format!("BALCAO_TRANSCRIPTION_URL={:?} must be an http(s) URL", t.url));
        }
        let shutdown_grace =
            Duration::from_secs(r.bounded("BALCAO_SHUTDOWN_GRACE_SECONDS", 20, SHUTDOWN_GRACE_SECONDS, "seconds"));
        let handoff_idle =
            Duration::from_secs(60 * r.bounded("BALCAO_HANDOFF_IDLE_MINUTES", 30, HANDOFF_IDLE_MINUTES, "minutes"));
        let log_format = match r.string("BALCAO_LOG_FORMAT").as_deref() {
            None | Some("text") => LogFormat::Text,
            Some("json") => LogFormat::Json,
            Some(other) => {
                r.problems.push(format!("BALCAO_LOG_FORMAT={other:?} must be text or json"));
                LogFormat::Text
            }
        };

        check_together(&mut r, &queue, &outbox, &ledger);
        if !r.problems.is_empty() {
            return Err(ConfigError(r.problems));
        }
        Ok(Self {
            database_url,
            admin_token,
            trusted_proxy_header,
            public_url,
            pix_secrets: PixSecrets::default(),
            db_max_connections,
            addr,
            whatsapp,
            queue,
            intake,
            outbox,
            ledger,
            agent,
            transcription,
            shutdown_grace,
            log_format,
            handoff_idle,
        })
    }
}

/// Settings that are each in range but contradict one another.
fn check_together(r: &mut Reader<'_>, queue: &QueueConfig, outbox: &OutboxConfig, ledger: &LedgerConfig) {
    r.require(queue.debounce_max >= queue.debounce, "BALCAO_DEBOUNCE_MAX_MS must not be below BALCAO_DEBOUNCE_MS");
    r.require(
        queue.backoff_max >= queue.backoff_base,
        "BALCAO_JOB_BACKOFF_MAX_SECONDS must not be below BALCAO_JOB_BACKOFF_BASE_MS",
    );
    // A claimed row is held for the grace period; a shorter one than a send may take lets a
    // second sender claim the row while the first request is still in flight: a double send.
    r.require(
        outbox.grace > outbox.http_timeout,
        "BALCAO_OUTBOX_GRACE_SECONDS must be longer than BALCAO_HTTP_TIMEOUT_SECONDS",
    );
    // A tool call runs inside a turn: a key expiring before the turn's lease could be taken
    // over by another attempt while the turn that holds it is still alive.
    r.require(ledger.lease >= queue.lease, "BALCAO_LEDGER_LEASE_SECONDS must not be below BALCAO_JOB_LEASE_SECONDS");
}

fn default_addr() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 8080))
}
