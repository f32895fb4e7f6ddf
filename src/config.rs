//! Typed settings from the environment (and `.env`), validated once at start.
//!
//! Every variable is documented in `.env.example`. Secrets live in [`Secret`], whose `Debug`
//! never shows the value, and a database URL prints without its password.

use std::collections::HashMap;
use std::fmt;
use std::net::SocketAddr;
use std::ops::RangeInclusive;
use std::str::FromStr;
use std::time::Duration;

use crate::domain::{DatabaseUrl, Secret};

/// Where the Graph API lives; the version is part of the URL so operators can move it.
pub const DEFAULT_WHATSAPP_API_URL: &str = "https://graph.facebook.com/v25.0";
pub const DEFAULT_DATABASE_URL: &str = "sqlite://./data/balcao.db";
pub const DEFAULT_ADDR: &str = "127.0.0.1:8080";
/// Override with `ANTHROPIC_MODEL`; take real ids from the provider's model list.
pub const DEFAULT_ANTHROPIC_MODEL: &str = "claude-sonnet-4-5";
/// Used only in local mode (no `WHATSAPP_APP_SECRET`): nothing leaves the machine, and the
/// `balcao chat` client signs its payloads with the same value.
pub const LOCAL_DEV_APP_SECRET: &str = "balcao-local-development-secret";

// Bounds of the numeric settings. A value outside them is legal to parse but would stall,
// spin or overflow somewhere at run time (a `DateTime + Duration` past chrono's range panics
// inside a background task), so it is refused at start instead.

/// PostgreSQL allows 100 connections by default; a pool far beyond that fails only later.
const DB_MAX_CONNECTIONS: RangeInclusive<u64> = 1..=1_000;
/// Leases are renewed every third of their length: below 3 s that spins; above an hour a
/// crashed worker's turn waits that long before it is retried.
const JOB_LEASE_SECONDS: RangeInclusive<u64> = 3..=3_600;
/// A customer waits at least this long for an answer; past an hour it is no longer one.
const DEBOUNCE_MS: RangeInclusive<u64> = 0..=3_600_000;
const DEBOUNCE_MAX_MS: RangeInclusive<u64> = 0..=3_600_000;
/// Webhook writes committed together: 1 commits each on its own (no group commit); a batch
/// holds its writers' row locks until it commits, so a thousand is plenty.
const INTAKE_BATCH_MAX: RangeInclusive<u64> = 1..=1_000;
/// How long a batch waits for company after its first write; every write in it waits up to
/// this long, so beyond 100 ms it is a delay, not a batch.
const INTAKE_BATCH_WINDOW_MS: RangeInclusive<u64> = 0..=100;
/// Batches committing at once (PostgreSQL; SQLite has one writer). Each holds a connection.
const INTAKE_WRITERS: RangeInclusive<u64> = 1..=32;
/// Each worker may hold a database connection for a whole turn.
const WORKERS: RangeInclusive<u64> = 1..=256;
/// Every retry backs off exponentially, so more attempts than this would span weeks.
const MAX_ATTEMPTS: RangeInclusive<u64> = 1..=100;
/// The first retry delay: up to an hour.
const BACKOFF_BASE_MS: RangeInclusive<u64> = 1..=3_600_000;
/// The longest retry delay: a day, after which a reply is no longer worth sending.
const BACKOFF_MAX_SECONDS: RangeInclusive<u64> = 1..=86_400;
/// Finished jobs are kept up to a year.
const JOB_RETENTION_HOURS: RangeInclusive<u64> = 1..=8_760;
/// Idle workers and the sender look for work this often; zero would spin, and more than a
/// minute delays work that arrived without a wake-up (from another process).
const POLL_INTERVAL_MS: RangeInclusive<u64> = 1..=60_000;
/// A send with a lost response waits this long for a status webhook: up to a day.
const OUTBOX_GRACE_SECONDS: RangeInclusive<u64> = 1..=86_400;
const OUTBOX_SENDERS: RangeInclusive<u64> = 1..=64;
/// One call to the Graph API; Meta answers in seconds, five minutes is a hung connection.
const HTTP_TIMEOUT_SECONDS: RangeInclusive<u64> = 1..=300;
/// Renewed every third of its length like the job lease; never shorter than it (see below).
const LEDGER_LEASE_SECONDS: RangeInclusive<u64> = 3..=7_200;
/// Settled ledger rows are kept up to ten years.
const LEDGER_RETENTION_DAYS: RangeInclusive<u64> = 1..=3_650;
/// Model calls per turn; each is a paid round trip the customer waits for.
const AGENT_MAX_STEPS: RangeInclusive<u64> = 1..=50;
/// No current model answers with more tokens than this in one response.
const AGENT_MAX_TOKENS: RangeInclusive<u64> = 1..=200_000;
const AGENT_HISTORY_TURNS: RangeInclusive<u64> = 1..=1_000;
/// A few megabytes of history already exceeds every model's context window.
const AGENT_HISTORY_BUDGET_CHARS: RangeInclusive<u64> = 1..=4_000_000;
/// One model call, retries included; past ten minutes the customer has given up.
const LLM_TIMEOUT_SECONDS: RangeInclusive<u64> = 1..=600;
/// A human handoff ends after this long without messages: at least a few minutes (a person
/// types slowly), at most a day.
const HANDOFF_IDLE_MINUTES: RangeInclusive<u64> = 5..=1_440;
/// In-flight turns get this long on shutdown; supervisors kill a process long before an hour.
const SHUTDOWN_GRACE_SECONDS: RangeInclusive<u64> = 1..=3_600;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Clone)]
pub struct WhatsAppConfig {
    /// Verifies `X-Hub-Signature-256`. Local mode falls back to [`LOCAL_DEV_APP_SECRET`].
    pub app_secret: Secret,
    /// True when `app_secret` is the built-in development value. Decided at start for the
    /// whole process: in local mode nothing is ever sent, whatever tokens tenants gain later.
    pub local_mode: bool,
    /// `BALCAO_LOCAL_MODE_PUBLIC`: lets local mode listen on a non-loopback address (its
    /// webhook secret is public, so anyone reaching the port can post messages).
    pub local_mode_public: bool,
    pub verify_token: Option<Secret>,
    pub access_token: Option<Secret>,
    pub api_url: String,
}

/// Group commit at the webhook intake (`crate::inbound::group_commit`).
#[derive(Debug, Clone)]
pub struct IntakeConfig {
    /// `BALCAO_INTAKE_BATCH_MAX`: writes per commit at most; 1 turns group commit off.
    pub batch_max: usize,
    /// `BALCAO_INTAKE_BATCH_WINDOW_MS`: how long a batch stays open for more writes. 0 by
    /// default: batches still form from what queues while earlier ones commit, and no write
    /// waits for company; a window helps where a commit is slow against the gaps between
    /// messages (a slow disk).
    pub batch_window: Duration,
    /// `BALCAO_INTAKE_WRITERS`: batches committing at once on PostgreSQL.
    pub writers: usize,
}

#[derive(Debug, Clone)]
pub struct QueueConfig {
    pub lease: Duration,
    pub debounce: Duration,
    pub debounce_max: Duration,
    pub workers: usize,
    pub max_attempts: u32,
    pub backoff_base: Duration,
    pub backoff_max: Duration,
    pub retention: Duration,
    pub poll_interval: Duration,
}

/// Which agent answers turns.
#[derive(Debug, Clone)]
pub enum AgentKind {
    /// No model: the deterministic menu agent (until it lands, a fixed acknowledgement).
    Guided,
    Anthropic {
        api_key: Secret,
        model: String,
        base_url: String,
    },
    OpenAi {
        api_key: Option<Secret>,
        model: String,
        base_url: String,
        parallel_tool_calls: bool,
    },
}

#[derive(Debug, Clone)]
pub struct AgentConfig {
    pub kind: AgentKind,
    pub max_steps: u32,
    pub max_tokens: u32,
    pub history_turns: i64,
    pub history_budget_chars: usize,
    pub llm_timeout: Duration,
}

#[derive(Debug, Clone)]
pub struct LedgerConfig {
    /// How long an attempt at a side effect holds its key before another may take over.
    pub lease: Duration,
    /// Settled ledger rows are kept this long (at least the booking horizon), then pruned.
    pub retention: Duration,
}

#[derive(Debug, Clone)]
pub struct OutboxConfig {
    /// How long a send whose response was lost waits for a status webhook before resending.
    pub grace: Duration,
    /// Sends in flight at once per process: one slow Graph API answer (up to the HTTP timeout)
    /// then holds back one sender, not every tenant's replies.
    pub senders: usize,
    pub max_attempts: u32,
    pub http_timeout: Duration,
}

/// The source of Pix provider secrets; its `Debug` shows nothing of them.
#[derive(Clone)]
pub struct PixSecrets(pub std::sync::Arc<dyn crate::pix::Secrets>);

impl Default for PixSecrets {
    fn default() -> Self {
        Self(std::sync::Arc::new(crate::pix::EnvSecrets))
    }
}

impl std::fmt::Debug for PixSecrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PixSecrets(..)")
    }
}

#[derive(Debug, Clone)]
pub struct Config {
    pub database_url: DatabaseUrl,
    /// Opens the simulator API (`/simulator/api`) outside local mode on a loopback address.
    pub admin_token: Option<Secret>,
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

struct Reader<'a> {
    vars: &'a HashMap<String, String>,
    problems: Vec<String>,
}

impl Reader<'_> {
    fn string(&self, name: &str) -> Option<String> {
        self.vars.get(name).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty())
    }

    fn parsed<T: FromStr>(&mut self, name: &str, default: T, what: &str) -> T
    where
        T::Err: fmt::Display,
    {
        match self.string(name) {
            None => default,
            Some(raw) => match raw.parse() {
                Ok(v) => v,
                Err(e) => {
                    self.problems.push(format!("{name}={raw:?} is not {what}: {e}"));
                    default
                }
            },
        }
    }

    /// A whole number within `bounds` (the default must be within them too).
    fn bounded(&mut self, name: &str, default: u64, bounds: RangeInclusive<u64>, unit: &str) -> u64 {
        debug_assert!(bounds.contains(&default), "default of {name} out of its bounds");
        let v = self.parsed(name, default, &format!("a whole number of {unit}"));
        if !bounds.contains(&v) {
            self.problems.push(format!(
                "{name}={v} is out of range: it must be between {} and {} {unit}",
                bounds.start(),
                bounds.end()
            ));
            return default;
        }
        v
    }

    fn flag(&mut self, name: &str) -> bool {
        match self.string(name).as_deref() {
            None | Some("0" | "false") => false,
            Some("1" | "true") => true,
            Some(other) => {
                self.problems.push(format!("{name}={other:?} must be 1 or 0 (true or false)"));
                false
            }
        }
    }

    /// Records a problem when two settings contradict each other.
    fn require(&mut self, holds: bool, problem: &str) {
        if !holds {
            self.problems.push(problem.to_owned());
        }
    }
}

impl Config {
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
        let whatsapp = WhatsAppConfig {
            app_secret: app_secret.unwrap_or_else(|| Secret::new(LOCAL_DEV_APP_SECRET)),
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
                    model: r.string("ANTHROPIC_MODEL").unwrap_or_else(|| DEFAULT_ANTHROPIC_MODEL.to_owned()),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn defaults_need_no_setup() {
        let c = Config::from_vars(&HashMap::new()).unwrap();
        assert_eq!(c.addr.to_string(), DEFAULT_ADDR);
        assert!(c.database_url.is_sqlite());
        assert!(c.whatsapp.local_mode);
        assert_eq!(c.queue.debounce, Duration::from_millis(2000));
        assert_eq!(c.queue.debounce_max, Duration::from_secs(10));
    }

    #[test]
    fn secrets_never_show_in_debug() {
        let c = Config::from_vars(&vars(&[
            ("WHATSAPP_APP_SECRET", "app-secret-value"),
            ("WHATSAPP_ACCESS_TOKEN", "EAAG-token-value"),
            ("WHATSAPP_VERIFY_TOKEN", "verify-value"),
            ("DATABASE_URL", "postgres://balcao:hunter2@db:5432/balcao"),
        ]))
        .unwrap();
        let debug = format!("{c:?}");
        for secret in ["app-secret-value", "EAAG-token-value", "verify-value", "hunter2"] {
            assert!(!debug.contains(secret), "{secret} leaked in {debug}");
        }
        assert!(debug.contains("postgres://balcao:[redacted]@db:5432/balcao"));
    }

    #[test]
    fn reports_every_problem_at_once() {
        let err = Config::from_vars(&vars(&[
            ("WHATSAPP_ACCESS_TOKEN", "x"),
            ("BALCAO_DEBOUNCE_MS", "soon"),
            ("BALCAO_JOB_LEASE_SECONDS", "0"),
            ("DATABASE_URL", "mysql://x"),
        ]))
        .unwrap_err();
        let text = err.to_string();
        assert_eq!(err.0.len(), 4, "{text}");
        assert!(text.contains("WHATSAPP_APP_SECRET is required"));
        assert!(text.contains("BALCAO_DEBOUNCE_MS=\"soon\""));
    }

    /// Every numeric setting with its bounds.
    const BOUNDED: &[(&str, RangeInclusive<u64>)] = &[
        ("BALCAO_DB_MAX_CONNECTIONS", DB_MAX_CONNECTIONS),
        ("BALCAO_JOB_LEASE_SECONDS", JOB_LEASE_SECONDS),
        ("BALCAO_DEBOUNCE_MS", DEBOUNCE_MS),
        ("BALCAO_DEBOUNCE_MAX_MS", DEBOUNCE_MAX_MS),
        ("BALCAO_WORKERS", WORKERS),
        ("BALCAO_INTAKE_BATCH_MAX", INTAKE_BATCH_MAX),
        ("BALCAO_INTAKE_BATCH_WINDOW_MS", INTAKE_BATCH_WINDOW_MS),
        ("BALCAO_INTAKE_WRITERS", INTAKE_WRITERS),
        ("BALCAO_JOB_MAX_ATTEMPTS", MAX_ATTEMPTS),
        ("BALCAO_JOB_BACKOFF_BASE_MS", BACKOFF_BASE_MS),
        ("BALCAO_JOB_BACKOFF_MAX_SECONDS", BACKOFF_MAX_SECONDS),
        ("BALCAO_JOB_RETENTION_HOURS", JOB_RETENTION_HOURS),
        ("BALCAO_POLL_INTERVAL_MS", POLL_INTERVAL_MS),
        ("BALCAO_OUTBOX_GRACE_SECONDS", OUTBOX_GRACE_SECONDS),
        ("BALCAO_OUTBOX_MAX_ATTEMPTS", MAX_ATTEMPTS),
        ("BALCAO_HTTP_TIMEOUT_SECONDS", HTTP_TIMEOUT_SECONDS),
        ("BALCAO_LEDGER_LEASE_SECONDS", LEDGER_LEASE_SECONDS),
        ("BALCAO_LEDGER_RETENTION_DAYS", LEDGER_RETENTION_DAYS),
        ("BALCAO_AGENT_MAX_STEPS", AGENT_MAX_STEPS),
        ("BALCAO_AGENT_MAX_TOKENS", AGENT_MAX_TOKENS),
        ("BALCAO_AGENT_HISTORY_TURNS", AGENT_HISTORY_TURNS),
        ("BALCAO_AGENT_HISTORY_BUDGET_CHARS", AGENT_HISTORY_BUDGET_CHARS),
        ("BALCAO_LLM_TIMEOUT_SECONDS", LLM_TIMEOUT_SECONDS),
        ("BALCAO_SHUTDOWN_GRACE_SECONDS", SHUTDOWN_GRACE_SECONDS),
        ("BALCAO_HANDOFF_IDLE_MINUTES", HANDOFF_IDLE_MINUTES),
    ];

    fn range_problems(err: &ConfigError, name: &str) -> usize {
        err.0.iter().filter(|p| p.starts_with(&format!("{name}=")) && p.contains("out of range")).count()
    }

    #[test]
    fn every_numeric_setting_is_bounded() {
        for (name, bounds) in BOUNDED {
            let mut outside = vec![bounds.end() + 1, u64::MAX];
            if *bounds.start() > 0 {
                outside.push(bounds.start() - 1);
            }
            for value in outside {
                let err = Config::from_vars(&vars(&[(name, &value.to_string())]))
                    .expect_err(&format!("{name}={value} was accepted"));
                assert_eq!(range_problems(&err, name), 1, "{name}={value}: {err}");
            }
            for value in [*bounds.start(), *bounds.end()] {
                // A bound may contradict another setting's default; only its own range counts.
                if let Err(err) = Config::from_vars(&vars(&[(name, &value.to_string())])) {
                    assert_eq!(range_problems(&err, name), 0, "{name}={value}: {err}");
                }
            }
        }
    }

    #[test]
    fn the_largest_values_convert_to_timestamps() {
        // The longest durations end up added to "now" as chrono deltas in background tasks.
        let c = Config::from_vars(&vars(&[
            ("BALCAO_JOB_RETENTION_HOURS", &JOB_RETENTION_HOURS.end().to_string()),
            ("BALCAO_LEDGER_RETENTION_DAYS", &LEDGER_RETENTION_DAYS.end().to_string()),
            ("BALCAO_LEDGER_LEASE_SECONDS", &LEDGER_LEASE_SECONDS.end().to_string()),
            ("BALCAO_JOB_LEASE_SECONDS", &JOB_LEASE_SECONDS.end().to_string()),
            ("BALCAO_OUTBOX_GRACE_SECONDS", &OUTBOX_GRACE_SECONDS.end().to_string()),
            ("BALCAO_JOB_BACKOFF_MAX_SECONDS", &BACKOFF_MAX_SECONDS.end().to_string()),
            ("BALCAO_DEBOUNCE_MAX_MS", &DEBOUNCE_MAX_MS.end().to_string()),
        ]))
        .unwrap();
        let now = chrono::Utc::now();
        for d in [c.queue.retention, c.ledger.retention, c.ledger.lease, c.queue.lease, c.outbox.grace] {
            let delta = chrono::TimeDelta::from_std(d).unwrap();
            assert!(now.checked_add_signed(delta).is_some() && now.checked_sub_signed(delta).is_some());
        }
        assert!(c.queue.lease / 3 > Duration::ZERO && c.ledger.lease / 3 > Duration::ZERO);
    }

    #[test]
    fn contradicting_settings_are_refused_together() {
        let err = Config::from_vars(&vars(&[
            ("BALCAO_DEBOUNCE_MS", "5000"),
            ("BALCAO_DEBOUNCE_MAX_MS", "1000"),
            ("BALCAO_JOB_BACKOFF_BASE_MS", "600000"),
            ("BALCAO_JOB_BACKOFF_MAX_SECONDS", "300"),
            ("BALCAO_OUTBOX_GRACE_SECONDS", "15"),
            ("BALCAO_HTTP_TIMEOUT_SECONDS", "15"),
            ("BALCAO_JOB_LEASE_SECONDS", "300"),
            ("BALCAO_LEDGER_LEASE_SECONDS", "120"),
            ("BALCAO_WORKERS", "0"),
        ]))
        .unwrap_err();
        let text = err.to_string();
        assert_eq!(err.0.len(), 5, "{text}");
        for expected in [
            "BALCAO_DEBOUNCE_MAX_MS must not be below BALCAO_DEBOUNCE_MS",
            "BALCAO_JOB_BACKOFF_MAX_SECONDS must not be below BALCAO_JOB_BACKOFF_BASE_MS",
            "BALCAO_OUTBOX_GRACE_SECONDS must be longer than BALCAO_HTTP_TIMEOUT_SECONDS",
            "BALCAO_LEDGER_LEASE_SECONDS must not be below BALCAO_JOB_LEASE_SECONDS",
            "BALCAO_WORKERS=0 is out of range",
        ] {
            assert!(text.contains(expected), "missing {expected:?} in {text}");
        }
    }

    #[test]
    fn local_mode_public_is_an_explicit_flag() {
        assert!(!Config::from_vars(&HashMap::new()).unwrap().whatsapp.local_mode_public);
        let on = Config::from_vars(&vars(&[("BALCAO_LOCAL_MODE_PUBLIC", "1")])).unwrap();
        assert!(on.whatsapp.local_mode_public);
        let err = Config::from_vars(&vars(&[("BALCAO_LOCAL_MODE_PUBLIC", "yes please")])).unwrap_err();
        assert!(err.to_string().contains("BALCAO_LOCAL_MODE_PUBLIC"), "{err}");
    }
}
