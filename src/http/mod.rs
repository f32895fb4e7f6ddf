//! The axum edge: the WhatsApp and Pix webhooks, health, metrics, the simulator's page and API,
//! and the merchant console ([`console`]). Handlers verify, persist and answer; slow work
//! happens in jobs. One [`AppState`] serves every route.

pub mod console;
mod error;
mod health;
mod pix_webhook;
mod simulator;
mod whatsapp_webhook;

pub use error::ApiError;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use tokio::sync::Notify;
use tower_http::timeout::TimeoutLayer;
use tower_http::trace::TraceLayer;

use crate::domain::Secret;
use crate::inbound::TenantDirectory;
use crate::metrics::Metrics;
use crate::store::Store;

/// Meta sends webhook payloads of up to 3 MB (axum's default limit is 2 MB).
pub const WEBHOOK_BODY_LIMIT: usize = 3 * 1024 * 1024;
/// Keeps shutdown bounded: no request outlives this.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// The console's own database connections (`Store::edge`): a few admins at once. A flood of
/// logins from strangers waits on these, never on the pool the bot runs on.
pub const CONSOLE_CONNECTIONS: u32 = 4;

/// Cheap clonable handles shared by every handler.
#[derive(Clone)]
pub struct AppState {
    pub store: Store,
    /// The same database through the console's own connections ([`CONSOLE_CONNECTIONS`]): the
    /// console's routes and its sessions run on it ([`router`] gives them this as `store`).
    pub console_store: Store,
    /// Console logins' password checks, a few at a time.
    pub password_checks: crate::http::console::password::PasswordChecks,
    pub tenants: Arc<TenantDirectory>,
    pub metrics: Metrics,
    pub app_secret: Secret,
    /// Hashes message ids as webhooks arrive, and erased identities.
    pub privacy_key: crate::domain::PrivacyKey,
    pub verify_token: Option<Secret>,
    /// Stores webhook writes, committed in groups across concurrent requests.
    pub intake: crate::inbound::GroupCommit,
    /// Wakes idle workers after a message is stored.
    pub wake_workers: Arc<Notify>,
    /// Opens the simulator API to its bearer (constant-time comparison).
    pub admin_token: Option<Secret>,
    /// Where a console login's source address comes from behind a proxy
    /// (`BALCAO_TRUSTED_PROXY_HEADER`, lowercase).
    pub trusted_proxy_header: Option<String>,
    /// The simulator API is open to anyone: only in local mode on a loopback address.
    pub simulator_open: bool,
    /// Queues the messages the simulator's actions cause (a sandbox charge marked paid).
    pub replier: crate::jobs::Replier,
    /// Each tenant's Pix gateway: authenticates payment notifications.
    pub gateways: Arc<crate::pix::Gateways>,
    /// Wakes the payment processor after a notification is stored.
    pub wake_payments: Arc<Notify>,
    /// The console's CSRF cookie settings.
    pub csrf: axum_csrf::CsrfConfig,
    /// Cookies are `Secure` (the public URL is https).
    pub secure_cookies: bool,
    /// How long a console takeover lasts without messages (`BALCAO_HANDOFF_IDLE_MINUTES`).
    pub handoff_idle: chrono::TimeDelta,
    /// Cancelled at shutdown: long-lived responses (server-sent events) end with it.
    pub stopping: tokio_util::sync::CancellationToken,
}

impl axum::extract::FromRef<AppState> for axum_csrf::CsrfConfig {
    fn from_ref(state: &AppState) -> Self {
        state.csrf.clone()
    }
}

pub fn router(state: AppState) -> Router {
    let sessions = crate::http::console::session_layer(state.console_store.clone(), state.secure_cookies);
    let console = AppState { store: state.console_store.clone(), ..state.clone() };
    Router::new()
        .merge(crate::http::console::router(console.clone()).with_state(console))
        .route("/", get(home))
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .route("/metrics", get(health::metrics))
        .merge(simulator::routes())
        .route("/webhooks/pix/{slug}/{provider}", post(pix_webhook::notify))
        .route("/webhooks/pix/{slug}/{provider}/{secret}", post(pix_webhook::notify_with_secret))
        .route("/webhooks/pix/{slug}/{provider}/{secret}/pix", post(pix_webhook::notify_with_secret))
        .route(
            "/webhooks/whatsapp",
            get(whatsapp_webhook::verify_subscription)
                .post(whatsapp_webhook::receive)
                .layer(DefaultBodyLimit::max(WEBHOOK_BODY_LIMIT)),
        )
        .layer(sessions)
        .layer(TimeoutLayer::with_status_code(axum::http::StatusCode::SERVICE_UNAVAILABLE, REQUEST_TIMEOUT))
        .layer(TraceLayer::new_for_http().make_span_with(|request: &axum::http::Request<axum::body::Body>| {
            tracing::debug_span!("request", method = %request.method(), path = %loggable_path(request.uri().path()))
        }))
        .with_state(state)
}

/// `/`: where a person starts. The simulator when it is open to anyone (local mode), else the
/// merchant console (its login when needed).
async fn home(axum::extract::State(state): axum::extract::State<AppState>) -> axum::response::Redirect {
    axum::response::Redirect::to(if state.simulator_open { "/simulator" } else { "/admin" })
}

/// The path as logs may show it: a Pix callback's secret segment (`/webhooks/pix/{tenant}/
/// {provider}/{secret}…`) and the query string are left out.
fn loggable_path(path: &str) -> String {
    match path.strip_prefix("/webhooks/pix/") {
        Some(rest) => {
            let kept: Vec<&str> = rest.splitn(3, '/').take(2).collect();
            let hidden = if rest.splitn(3, '/').count() > 2 { "/…" } else { "" };
            format!("/webhooks/pix/{}{hidden}", kept.join("/"))
        }
        None => path.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_callback_secret_never_reaches_the_logs() {
        assert_eq!(super::loggable_path("/webhooks/pix/barbearia/bacen/s3cr3t/pix"), "/webhooks/pix/barbearia/bacen/…");
        assert_eq!(super::loggable_path("/webhooks/pix/barbearia/asaas"), "/webhooks/pix/barbearia/asaas");
        assert_eq!(super::loggable_path("/healthz"), "/healthz");
    }
}
