//! `/admin`: the merchant console. Server-rendered pages (askama templates under
//! `templates/console/`, a little plain JavaScript, assets compiled into the binary).
//!
//! Invariants:
//! - Every route except the login form sits behind [`auth::Admin`]: no session → redirect to
//!   the login page.
//! - Every route under `/admin/{slug}/…` resolves the tenant through the admin's memberships
//!   ([`auth::Admin::tenant`]) and scopes every query by that tenant; an id of another tenant
//!   is "not found", exactly like an id that does not exist.
//! - Every POST carries a CSRF token, checked by one middleware before any handler runs
//!   ([`auth::require_csrf`]), so handlers do not check it again.
//! - The console changes the world only through the paths the bot uses (the ledger tools, the
//!   outbox), so a console action is as idempotent as the bot's.

pub mod auth;
mod error;
pub mod page;
pub mod password;
mod second_factor;
mod session_store;
mod throttle;

mod agenda;
mod contacts;
mod conversations;
mod operations;

pub use error::ConsoleError;
pub use session_store::{DbSessionStore, run_pruning};

use axum::Router;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use tower_sessions::cookie::SameSite;
use tower_sessions::{Expiry, SessionManagerLayer};

use crate::http::AppState;

/// How long a console session lasts without a request.
const SESSION_IDLE: time::Duration = time::Duration::hours(12);

/// The console's routes (the session layer is applied by [`session_layer`] in the http router,
/// so the simulator sees the same session).
pub fn router(state: AppState) -> Router<AppState> {
    Router::new()
        .route("/admin", get(auth::home))
        .route("/admin/login", get(auth::login_form).post(auth::login))
        .route("/admin/aviso", get(auth::notice))
        .route("/admin/logout", post(auth::logout))
        .route("/admin/assets/console.css", get(stylesheet))
        .merge(agenda::routes())
        .merge(conversations::routes())
        .merge(operations::routes())
        .merge(contacts::routes())
        .route_layer(axum::middleware::from_fn_with_state(state.clone(), one_unit))
        .route_layer(axum::middleware::from_fn_with_state(state, auth::require_csrf))
}

/// Console requests that must not hold a connection across their work: the login (its
/// password check is CPU work, and anyone may post it) and a charge's withdrawal (a call to the
/// Pix provider).
const NOT_UNITS: &[&str] = &["/admin/login", "/admin/{slug}/charges/{id}/cancel"];

/// A console request is one unit of work: its statements share one database connection on
/// PostgreSQL (the console's own, `AppState::console_store`), except [`NOT_UNITS`]. Not the
/// webhooks: a webhook waits for the intake's group commit, whose writer needs a connection of
/// its own (a unit must never wait on a task that needs one).
async fn one_unit(
    axum::extract::State(state): axum::extract::State<AppState>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let path = request.extensions().get::<axum::extract::MatchedPath>().map(axum::extract::MatchedPath::as_str);
    if request.method() == axum::http::Method::POST && path.is_some_and(|p| NOT_UNITS.contains(&p)) {
        return next.run(request).await;
    }
    state.store.unit(next.run(request)).await
}

/// Sessions in our database; cookies HttpOnly, SameSite=Lax, and Secure when the public URL
/// is https (behind TLS).
pub fn session_layer(store: crate::store::Store, secure: bool) -> SessionManagerLayer<DbSessionStore> {
    SessionManagerLayer::new(DbSessionStore::new(store))
        .with_name("balcao_session")
        .with_http_only(true)
        .with_same_site(SameSite::Lax)
        .with_secure(secure)
        .with_expiry(Expiry::OnInactivity(SESSION_IDLE))
        // tower-sessions saves (and so extends) only changed sessions unless told otherwise.
        .with_always_save(true)
}

/// The CSRF cookie follows the session cookie's rules. The form token is an HMAC of the
/// cookie's random value under a salt derived from the WhatsApp App Secret, which every server
/// of a deployment shares: a form rendered by one process is accepted by another and survives
/// restarts (axum_csrf's default salt is random per process).
pub fn csrf_config(secure: bool, app_secret: &crate::domain::Secret) -> axum_csrf::CsrfConfig {
    use hmac::{KeyInit, Mac};
    let salt = hmac::Hmac::<sha2::Sha256>::new_from_slice(app_secret.expose().as_bytes())
        .map(|mac| mac.chain_update(b"balcao/console/csrf/v1").finalize().into_bytes())
        .map(hex::encode)
        .unwrap_or_default();
    axum_csrf::CsrfConfig::default()
        .with_cookie_name("balcao_csrf")
        .with_http_only(true)
        .with_cookie_same_site(axum_csrf::SameSite::Strict)
        .with_secure(secure)
        // The default encrypts the cookie with a key drawn per process; the cookie is HttpOnly
        // and SameSite=Strict, and the salt keeps the form token unforgeable without it.
        .with_key(None)
        .with_salt(salt)
}

async fn stylesheet() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], include_str!("../../../assets/console.css"))
}
