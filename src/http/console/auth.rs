//! Who is at the console: email and password (argon2id), an optional TOTP code
//! (`balcao admin totp EMAIL`), a session (tower-sessions, stored in our database), CSRF tokens
//! on every form (axum_csrf, double-submit), and a login throttle by source and e-mail counted
//! in the database so every server process enforces it ([`super::throttle`]).
//!
//! Invariants: a session holds only the admin's id; their tenants are read on every request,
//! so removing a membership takes effect at once. The session id changes at login (no
//! fixation). A throttled attempt is refused before its password is checked, and not counted.
//! A TOTP code works once (its time step is spent), and wrong ones behind a right password are
//! throttled per admin ([`super::second_factor`]). A login holds no database connection while
//! its password is checked, and only a few checks run at once (`super::password`), so a flood
//! of logins from strangers costs the console its share of the pool and the CPU of those few
//! checks, never the workers' connections.

use axum::Form;
use std::net::{IpAddr, SocketAddr};

use axum::extract::{ConnectInfo, FromRequestParts, State};
use axum::http::request::Parts;
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum_csrf::CsrfToken;
use chrono::{TimeDelta, Utc};
use serde::Deserialize;
use tower_sessions::Session;

use super::error::{ConsoleError, render};
use super::password::hash_password;
use super::second_factor::{self, Code, Notice};
use super::throttle;
use crate::domain::TotpSecret;
use crate::http::AppState;
use crate::store::{AdminStore, LoginFailures, LoginStore, Tally, TenantRef, TenantStore};
use crate::tenant::Tenant;

const ADMIN_ID: &str = "admin_id";
/// The wrong codes since the login before, for `/admin/aviso` to show once: (count, last).
const NOTICE: &str = "security_notice";

/// A logged-in admin and the tenants they may see.
#[derive(Debug, Clone)]
pub struct Admin {
    pub id: i64,
    pub email: String,
    pub tenants: Vec<TenantRef>,
}

impl Admin {
    /// The tenant `slug`, if this admin belongs to it; anything else is "not found".
    pub async fn tenant(&self, state: &AppState, slug: &str) -> Result<Tenant, ConsoleError> {
        let Some(member) = self.tenants.iter().find(|t| t.slug == slug) else {
            return Err(ConsoleError::NotFound);
        };
        state.store.tenant(member.tenant_id()).await?.ok_or(ConsoleError::NotFound)
    }
}

impl FromRequestParts<AppState> for Admin {
    type Rejection = ConsoleError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let session = Session::from_request_parts(parts, state).await.map_err(|_| ConsoleError::LoginRequired)?;
        let id: Option<i64> = session.get(ADMIN_ID).await.map_err(|e| ConsoleError::Internal(e.into()))?;
        let Some(id) = id else { return Err(ConsoleError::LoginRequired) };
        let Some(admin) = state.store.admin_by_id(id).await? else {
            session.flush().await.map_err(|e| ConsoleError::Internal(e.into()))?;
            return Err(ConsoleError::LoginRequired);
        };
        let tenants = state.store.admin_tenants(id).await?;
        Ok(Admin { id, email: admin.email, tenants })
    }
}

/// Checks a form's CSRF token against the request's CSRF cookie.
fn verify_csrf(token: &CsrfToken, presented: &str) -> Result<(), ConsoleError> {
    token.verify(presented).map_err(|_| ConsoleError::Csrf)
}

/// The token a page puts in its forms (`authenticity_token`).
pub fn csrf_field(token: &CsrfToken) -> Result<String, ConsoleError> {
    token.authenticity_token().map_err(|e| ConsoleError::Internal(anyhow::anyhow!("csrf token: {e}")))
}

#[derive(askama::Template)]
#[template(path = "console/login.html")]
struct LoginPage<'a> {
    csrf: String,
    email: &'a str,
    error: Option<&'a str>,
}

pub async fn login_form(token: CsrfToken) -> Result<Response, ConsoleError> {
    let page = LoginPage { csrf: csrf_field(&token)?, email: "", error: None };
    Ok((token, render(&page)?).into_response())
}

#[derive(Deserialize)]
pub struct LoginForm {
    email: String,
    password: String,
    /// The authenticator app's code, for admins who turned it on.
    #[serde(default)]
    code: String,
}

/// Where a login comes from: the peer's address or, when the peer is a proxy of ours (a
/// loopback or private address) and `BALCAO_TRUSTED_PROXY_HEADER` is set, the last address it
/// wrote to that header (the one it saw; earlier ones are the client's to invent). An IPv6
/// source is its /64, the block one subscriber holds, so it cannot pose as endless sources.
///
/// Every address is canonical before it is judged or keyed: on a dual-stack socket (a
/// `[::]` bind) an IPv4 peer arrives as `::ffff:127.0.0.1`, which `is_loopback` says is not.
pub struct Source(String);

impl FromRequestParts<AppState> for Source {
    type Rejection = ConsoleError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let peer = parts.extensions.get::<ConnectInfo<SocketAddr>>().map(|c| c.0.ip().to_canonical());
        let proxied = peer.is_some_and(|ip| ip.is_loopback() || is_private(ip));
        let forwarded = state.trusted_proxy_header.as_deref().filter(|_| proxied).and_then(|name| {
            let value = parts.headers.get_all(name).iter().filter_map(|v| v.to_str().ok()).next_back()?;
            let address = value.rsplit(',').map(str::trim).find(|a| !a.is_empty())?;
            address.parse::<IpAddr>().ok().map(|ip| ip.to_canonical())
        });
        Ok(Self(forwarded.or(peer).map_or_else(|| "unknown".to_owned(), source_of)))
    }
}

/// A private (RFC 1918, or IPv6 unique local) address: a proxy on our own network.
fn is_private(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_private(),
        IpAddr::V6(v6) => (v6.segments()[0] & 0xfe00) == 0xfc00,
    }
}

/// The throttle's key of a canonical address: IPv4 as it is, IPv6 by /64.
fn source_of(ip: IpAddr) -> String {
    match ip.to_canonical() {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => {
            let s = v6.segments();
            format!("{:x}:{:x}:{:x}:{:x}::/64", s[0], s[1], s[2], s[3])
        }
    }
}

/// "30 segundos", "2 minutos": how long a throttled login waits, rounded up.
fn wait_text(wait: TimeDelta) -> String {
    let seconds = wait.num_seconds().max(1) + i64::from(wait.subsec_nanos() > 0);
    match seconds {
        1 => "1 segundo".to_owned(),
        2..=59 => format!("{seconds} segundos"),
        _ => match (seconds + 59) / 60 {
            1 => "1 minuto".to_owned(),
            minutes => format!("{minutes} minutos"),
        },
    }
}

pub async fn login(
    State(state): State<AppState>,
    session: Session,
    token: CsrfToken,
    Source(source): Source,
    Form(form): Form<LoginForm>,
) -> Result<Response, ConsoleError> {
    let Some(_in_line) = state.password_checks.admit() else {
        tracing::warn!(%source, "console login turned away: too many at once");
        let page = LoginPage {
            csrf: csrf_field(&token)?,
            email: form.email.trim(),
            error: Some("Muitas pessoas entrando ao mesmo tempo. Tente de novo em alguns segundos."),
        };
        let retry = [(axum::http::header::RETRY_AFTER, "5".to_owned())];
        return Ok((axum::http::StatusCode::SERVICE_UNAVAILABLE, retry, token, render(&page)?).into_response());
    };
    let email = form.email.trim().to_lowercase();
    let now = Utc::now();
    // Written as a failure before its password is checked, so parallel guesses see each other;
    // refused by the throttle, it is never written (it does not count).
    let refuse = |failures: &LoginFailures| throttle::wait(failures, now).is_some();
    let since = now - throttle::WINDOW;
    let begun = state.store.begin_login_attempt(&email, &source, now, since, &refuse).await?;
    let attempt = match begun {
        Ok(attempt) => attempt,
        Err(failures) => {
            let wait = throttle::wait(&failures, now).unwrap_or_default();
            tracing::warn!(%source, "console login throttled");
            let error = format!("Muitas tentativas erradas. Espere {} e tente de novo.", wait_text(wait));
            return refused(&token, &email, &error, wait);
        }
    };
    let admin = state.store.admin_by_email(&email).await?;
    // Argon2 takes tens of milliseconds of CPU and 19 MiB: a few at a time, off the async
    // workers, holding no database connection. An unknown email is checked against a dummy
    // hash so both answers take as long.
    let stored = admin.as_ref().map(|a| a.password_hash.clone());
    let matches = state.password_checks.check(form.password, stored).await?;
    // The second factor, for an admin who turned it on: a code of this step (or one either
    // side), each step spent once, under a throttle of its own per admin.
    let verified = match (&admin, matches) {
        (Some(admin), true) => match admin.totp_secret.as_deref() {
            None => true,
            Some(secret) => match second_factor::check(&state, admin, secret, &form.code, &source, now).await? {
                Code::Accepted => true,
                Code::Wrong => false,
                // Answered as a wrong login, and counted as one: a different answer would tell a
                // guesser that the password was right.
                Code::Throttled(wait) => {
                    tracing::warn!(%source, admin = admin.id, ?wait, "second factor throttled");
                    false
                }
            },
        },
        _ => false,
    };
    match admin {
        Some(admin) if verified => {
            state.store.forget_login_attempt(attempt).await?;
            state.store.clear_login_failures(&email, &source).await?;
            let since = state.store.record_login(admin.id, now).await?;
            session.cycle_id().await.map_err(|e| ConsoleError::Internal(e.into()))?;
            session.insert(ADMIN_ID, admin.id).await.map_err(|e| ConsoleError::Internal(e.into()))?;
            tracing::info!(admin = admin.id, "console login");
            if let Some(last) = since.last.filter(|_| since.count > 0) {
                let notice = (since.count, last.timestamp());
                session.insert(NOTICE, notice).await.map_err(|e| ConsoleError::Internal(e.into()))?;
                return Ok(Redirect::to("/admin/aviso").into_response());
            }
            Ok(Redirect::to("/admin").into_response())
        }
        _ => {
            tracing::warn!(%source, "console login failed");
            let error = "E-mail, senha ou código incorretos.";
            let page = LoginPage { csrf: csrf_field(&token)?, email: &email, error: Some(error) };
            Ok((axum::http::StatusCode::UNAUTHORIZED, token, render(&page)?).into_response())
        }
    }
}

/// The login form again, refused with `error` for `wait` (429, `Retry-After`).
fn refused(token: &CsrfToken, email: &str, error: &str, wait: TimeDelta) -> Result<Response, ConsoleError> {
    let page = LoginPage { csrf: csrf_field(token)?, email, error: Some(error) };
    let retry = [(axum::http::header::RETRY_AFTER, (wait.num_seconds() + 1).to_string())];
    Ok((axum::http::StatusCode::TOO_MANY_REQUESTS, retry, token.clone(), render(&page)?).into_response())
}

/// `/admin/aviso`: after a login, what happened to the account since the one before.
pub async fn notice(State(state): State<AppState>, admin: Admin, session: Session) -> Result<Response, ConsoleError> {
    let taken: Option<(i64, i64)> = session.remove(NOTICE).await.map_err(|e| ConsoleError::Internal(e.into()))?;
    let since = taken.map(|(count, last)| Tally { count, last: chrono::DateTime::from_timestamp(last, 0) });
    match since {
        Some(since) => match Notice::of(&state, &admin.email, admin.tenants.first(), &since).await? {
            Some(page) => Ok(render(&page)?.into_response()),
            None => Ok(Redirect::to("/admin").into_response()),
        },
        None => Ok(Redirect::to("/admin").into_response()),
    }
}

pub async fn logout(session: Session) -> Result<Response, ConsoleError> {
    session.flush().await.map_err(|e| ConsoleError::Internal(e.into()))?;
    Ok(Redirect::to("/admin/login").into_response())
}

/// `/admin`: the first tenant's agenda.
pub async fn home(admin: Admin) -> Result<Response, ConsoleError> {
    match admin.tenants.first() {
        Some(t) => Ok(Redirect::to(&format!("/admin/{}/agenda", t.slug)).into_response()),
        None => Ok(Html("<!doctype html><meta charset=utf-8><p>Sua conta não está ligada a nenhum negócio.</p>")
            .into_response()),
    }
}

/// Tests and `balcao admin add` use the same hashing.
pub async fn add_admin(
    store: &crate::store::Store,
    email: &str,
    password: &str,
    tenant_slug: &str,
) -> anyhow::Result<i64> {
    let email = email.trim().to_lowercase();
    anyhow::ensure!(email.contains('@') && email.len() <= 254, "{email:?} is not an email address");
    anyhow::ensure!(password.chars().count() >= 10, "the password must have at least 10 characters");
    let Some(tenant) = store.tenant_by_slug(tenant_slug).await? else {
        use crate::store::SimulatorStore;
        let known: Vec<String> = store.all_tenants().await?.into_iter().map(|t| t.slug).collect();
        anyhow::bail!(
            "no tenant {tenant_slug:?} in this database ({}): start the server once (in local mode it applies \
             the example business) or apply your tenant file with `balcao tenant apply tenants/<file>.toml`",
            if known.is_empty() { "it has none yet".to_owned() } else { format!("it has {}", known.join(", ")) }
        );
    };
    let password = password.to_owned();
    let hash = tokio::task::spawn_blocking(move || hash_password(&password)).await??;
    Ok(store.upsert_admin(&email, &hash, tenant.id, Utc::now()).await?)
}

/// Records that admin `email` is staff number `phone` of tenant `tenant_slug`: they are told
/// there when someone with their password is guessing codes (see `second_factor`).
pub async fn set_admin_phone(
    store: &crate::store::Store,
    email: &str,
    phone: &str,
    tenant_slug: &str,
) -> anyhow::Result<crate::domain::PhoneE164> {
    let email = email.trim().to_lowercase();
    let phone = crate::domain::PhoneE164::parse(phone.trim())
        .map_err(|e| anyhow::anyhow!("--phone must be a WhatsApp number like +5511988887777: {e}"))?;
    let tenant =
        store.tenant_by_slug(tenant_slug).await?.ok_or_else(|| anyhow::anyhow!("no tenant {tenant_slug:?}"))?;
    anyhow::ensure!(
        store.staff(tenant.id).await?.includes(Some(&phone)),
        "{phone} is not one of {tenant_slug}'s staff numbers (`staff` in its tenant file)"
    );
    anyhow::ensure!(store.set_admin_phone(&email, Some(phone.as_str()), Utc::now()).await?, "no admin {email:?}");
    Ok(phone)
}

/// Turns the admin's TOTP second factor on (a new secret, returned to show once) or off.
pub async fn set_totp(store: &crate::store::Store, email: &str, on: bool) -> anyhow::Result<Option<TotpSecret>> {
    let email = email.trim().to_lowercase();
    let secret = on.then(TotpSecret::random);
    let stored = secret.as_ref().map(TotpSecret::base32);
    anyhow::ensure!(store.set_totp_secret(&email, stored.as_deref(), Utc::now()).await?, "no admin {email:?}");
    Ok(secret)
}

/// The largest console form body (a reply text is the largest field).
const FORM_LIMIT: usize = 64 * 1024;

/// Every POST to the console carries a valid CSRF token, checked here before routing reaches a
/// handler (so no form can forget it, and a malformed form is still a 403, not a 422).
pub async fn require_csrf(
    State(state): State<AppState>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    if request.method() != axum::http::Method::POST {
        return next.run(request).await;
    }
    let (mut parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, FORM_LIMIT).await else {
        return ConsoleError::BadRequest("formulário grande demais".into()).into_response();
    };
    let presented = form_urlencoded_field(&bytes, "authenticity_token");
    let token = match CsrfToken::from_request_parts(&mut parts, &state).await {
        Ok(token) => token,
        Err(_) => return ConsoleError::Csrf.into_response(),
    };
    if presented.is_none_or(|p| verify_csrf(&token, &p).is_err()) {
        return ConsoleError::Csrf.into_response();
    }
    next.run(axum::extract::Request::from_parts(parts, axum::body::Body::from(bytes))).await
}

fn form_urlencoded_field(body: &[u8], name: &str) -> Option<String> {
    let fields: Vec<(String, String)> = serde_urlencoded::from_bytes(body).ok()?;
    fields.into_iter().find(|(k, _)| k == name).map(|(_, v)| v)
}
