//! Typed settings from the environment (and `.env`), validated once at start.
//!
//! Every variable is documented in `.env.example`. Secrets live in [`Secret`], whose `Debug`
//! never shows the value, and a database URL prints without its password.

use std::collections::HashMap;
use std::fmt;
use std::net::SocketAddr;
use std::str::FromStr;
use std::time::Duration;

/// Where the Graph API lives; the version is part of the URL so operators can move it.
pub const DEFAULT_WHATSAPP_API_URL: &str = "https://graph.facebook.com/v25.0";
pub const DEFAULT_DATABASE_URL: &str = "sqlite://./data/balcao.db";
pub const DEFAULT_ADDR: &str = "127.0.0.1:8080";
/// Override with `ANTHROPIC_MODEL`; take real ids from the provider's model list.
pub const DEFAULT_ANTHROPIC_MODEL: &str = "claude-sonnet-4-5";
/// Used only in local mode (no access token anywhere): nothing leaves the machine, and the
/// `balcao chat` client signs its payloads with the same value.
pub const LOCAL_DEV_APP_SECRET: &str = "balcao-local-development-secret";

/// A value that must not reach logs.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret([redacted])")
    }
}

/// A database URL whose `Debug` and `Display` hide the password.
#[derive(Clone, PartialEq, Eq)]
pub struct DatabaseUrl(String);

impl DatabaseUrl {
    pub fn new(url: impl Into<String>) -> Self {
        Self(url.into())
    }
    pub fn expose(&self) -> &str {
        &self.0
    }
    pub fn is_postgres(&self) -> bool {
        self.0.starts_with("postgres://") || self.0.starts_with("postgresql://")
    }
    pub fn is_sqlite(&self) -> bool {
        self.0.starts_with("sqlite:")
    }
    fn redacted(&self) -> String {
        let Some((scheme, rest)) = self.0.split_once("://") else {
            return self.0.clone();
        };
        match rest.rsplit_once('@') {
            Some((userinfo, host)) => {
                let user = userinfo.split(':').next().unwrap_or_default();
                if userinfo.contains(':') {
                    format!("{scheme}://{user}:[redacted]@{host}")
                } else {
                    format!("{scheme}://{user}@{host}")
                }
            }
            None => self.0.clone(),
        }
    }
}

impl fmt::Debug for DatabaseUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DatabaseUrl({})", self.redacted())
    }
}

impl fmt::Display for DatabaseUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.redacted())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Clone)]
pub struct WhatsAppConfig {
    /// Verifies `X-Hub-Signature-256`. Local mode falls back to [`LOCAL_DEV_APP_SECRET`].
    pub app_secret: Secret,
    /// True when `app_secret` is the built-in development value.
    pub local_mode: bool,
    pub verify_token: Option<Secret>,
    pub access_token: Option<Secret>,
    pub api_url: String,
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
    pub max_attempts: u32,
    pub http_timeout: Duration,
}

#[derive(Debug, Clone)]
pub struct Config {
    pub database_url: DatabaseUrl,
    /// Opens the simulator API (`/simulator/api`) when WhatsApp sending is configured.
    pub admin_token: Option<Secret>,
    pub db_max_connections: u32,
    pub addr: SocketAddr,
    pub whatsapp: WhatsAppConfig,
    pub queue: QueueConfig,
    pub outbox: OutboxConfig,
    pub ledger: LedgerConfig,
    pub agent: AgentConfig,
    pub shutdown_grace: Duration,
    pub log_format: LogFormat,
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

    fn positive(&mut self, name: &str, default: u64, unit: &str) -> u64 {
        let v = self.parsed(name, default, &format!("a whole number of {unit}"));
        if v == 0 {
            self.problems.push(format!("{name} must be greater than zero"));
            return default;
        }
        v
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
        let addr = r.parsed("BALCAO_ADDR", default_addr(), "a socket address like 127.0.0.1:8080");
        let db_max_connections = r.positive("BALCAO_DB_MAX_CONNECTIONS", 16, "connections") as u32;

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
            verify_token: r.string("WHATSAPP_VERIFY_TOKEN").map(Secret::new),
            access_token,
            api_url,
        };

        let lease = Duration::from_secs(r.positive("BALCAO_JOB_LEASE_SECONDS", 60, "seconds"));
        // The heartbeat renews every lease/3; below 3 s it would spin.
        if lease < Duration::from_secs(3) {
            r.problems.push("BALCAO_JOB_LEASE_SECONDS must be at least 3".to_owned());
        }
        let debounce = Duration::from_millis(r.parsed("BALCAO_DEBOUNCE_MS", 2000, "milliseconds"));
        let debounce_max = Duration::from_millis(r.parsed("BALCAO_DEBOUNCE_MAX_MS", 10_000, "milliseconds"));
        if debounce_max < debounce {
            r.problems.push("BALCAO_DEBOUNCE_MAX_MS must not be below BALCAO_DEBOUNCE_MS".to_owned());
        }
        let workers = r.positive("BALCAO_WORKERS", 4, "workers") as usize;
        let queue = QueueConfig {
            lease,
            debounce,
            debounce_max,
            workers,
            max_attempts: r.positive("BALCAO_JOB_MAX_ATTEMPTS", 5, "attempts") as u32,
            backoff_base: Duration::from_millis(r.positive("BALCAO_JOB_BACKOFF_BASE_MS", 1000, "milliseconds")),
            backoff_max: Duration::from_secs(r.positive("BALCAO_JOB_BACKOFF_MAX_SECONDS", 300, "seconds")),
            retention: Duration::from_secs(3600 * r.positive("BALCAO_JOB_RETENTION_HOURS", 168, "hours")),
            poll_interval: Duration::from_millis(r.positive("BALCAO_POLL_INTERVAL_MS", 250, "milliseconds")),
        };
        let outbox = OutboxConfig {
            grace: Duration::from_secs(r.positive("BALCAO_OUTBOX_GRACE_SECONDS", 60, "seconds")),
            max_attempts: r.positive("BALCAO_OUTBOX_MAX_ATTEMPTS", 8, "attempts") as u32,
            http_timeout: Duration::from_secs(r.positive("BALCAO_HTTP_TIMEOUT_SECONDS", 15, "seconds")),
        };
        let ledger = LedgerConfig {
            lease: Duration::from_secs(r.positive("BALCAO_LEDGER_LEASE_SECONDS", 120, "seconds")),
            retention: Duration::from_secs(86_400 * r.positive("BALCAO_LEDGER_RETENTION_DAYS", 30, "days")),
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
            max_steps: r.positive("BALCAO_AGENT_MAX_STEPS", 6, "steps") as u32,
            max_tokens: r.positive("BALCAO_AGENT_MAX_TOKENS", 1024, "tokens") as u32,
            history_turns: r.positive("BALCAO_AGENT_HISTORY_TURNS", 20, "turns") as i64,
            history_budget_chars: r.positive("BALCAO_AGENT_HISTORY_BUDGET_CHARS", 48_000, "characters") as usize,
            llm_timeout: Duration::from_secs(r.positive("BALCAO_LLM_TIMEOUT_SECONDS", 90, "seconds")),
        };
        let shutdown_grace = Duration::from_secs(r.positive("BALCAO_SHUTDOWN_GRACE_SECONDS", 20, "seconds"));
        let log_format = match r.string("BALCAO_LOG_FORMAT").as_deref() {
            None | Some("text") => LogFormat::Text,
            Some("json") => LogFormat::Json,
            Some(other) => {
                r.problems.push(format!("BALCAO_LOG_FORMAT={other:?} must be text or json"));
                LogFormat::Text
            }
        };

        if !r.problems.is_empty() {
            return Err(ConfigError(r.problems));
        }
        Ok(Self {
            database_url,
            admin_token,
            db_max_connections,
            addr,
            whatsapp,
            queue,
            outbox,
            ledger,
            agent,
            shutdown_grace,
            log_format,
        })
    }
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
}
