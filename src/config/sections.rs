//! The settings by concern: WhatsApp, the intake, the queue, the outbox, the ledger, the agent
//! and the Pix secrets, each a typed struct `Config` holds.

use std::time::Duration;

use crate::domain::{PrivacyKey, Secret};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Clone)]
pub struct WhatsAppConfig {
    /// Verifies `X-Hub-Signature-256`. Local mode falls back to [`LOCAL_DEV_APP_SECRET`].
    pub app_secret: Secret,
    /// Hashes message ids and erased identities (`crate::domain::PrivacyKey`):
    /// `BALCAO_PRIVACY_KEY`, else derived from the app secret. Set it before rotating the app
    /// secret, or stored ids (deduplication, tombstones) stop matching new ones.
    pub privacy_key: PrivacyKey,
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

/// An OpenAI-compatible transcription endpoint for voice notes (`crate::transcription`).
#[derive(Debug, Clone)]
pub struct TranscriptionConfig {
    /// `BALCAO_TRANSCRIPTION_URL`: the endpoint, or its base (`/v1/audio/transcriptions` added).
    pub url: String,
    /// `BALCAO_TRANSCRIPTION_MODEL`.
    pub model: String,
    /// `BALCAO_TRANSCRIPTION_API_KEY`: sent as a Bearer token when set.
    pub api_key: Option<Secret>,
    /// `BALCAO_TRANSCRIPTION_TIMEOUT_SECONDS`: per attempt.
    pub timeout: Duration,
}

/// The model asked for when `BALCAO_TRANSCRIPTION_MODEL` is not set (OpenAI's name for Whisper).
pub const DEFAULT_TRANSCRIPTION_MODEL: &str = "whisper-1";
