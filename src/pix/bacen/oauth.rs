//! OAuth2 client credentials against the PSP's token endpoint, over the mutual-TLS client.
//!
//! Invariants:
//! - One token at a time per gateway. The lock is held while a token is fetched, so callers
//!   that find it missing or stale wait for that one fetch instead of each fetching their own.
//! - A token is used until [`usable_for`] of its `expires_in` has passed (a minute's margin,
//!   or half its life for short-lived tokens), measured from when it was asked for; a
//!   lifetime over a day counts as a day.
//! - [`OAuth::renew`] replaces the token only if it is still the one the API refused: after
//!   a burst of `401`s, one caller renews and the others take its token.
//! - The request is HTTP Basic `client_id:client_secret` with the body Efí documents, JSON
//!   `{"grant_type":"client_credentials"}`; a provider that answers it with `400`/`415` is
//!   asked once more with RFC 6749's form body, and the encoding that worked is kept.

use std::fmt;
use std::time::Duration;

use reqwest::StatusCode;
use reqwest::header::{ACCEPT, CONTENT_TYPE};
use serde::Deserialize;
use tokio::sync::Mutex;
use tokio::time::Instant;

use super::api;
use crate::domain::Secret;
use crate::pix::gateway::GatewayError;

/// Renew this long before the provider's expiry, so a token does not die in flight.
const EXPIRY_MARGIN: Duration = Duration::from_secs(60);
/// RFC 6749 only recommends `expires_in`; without it, assume a short life.
const DEFAULT_EXPIRES_IN: Duration = Duration::from_secs(300);
/// The longest lifetime believed: a day. A larger `expires_in` (up to `u64::MAX` seconds) would
/// overflow the renewal instant; renewing daily costs one token request.
const MAX_EXPIRES_IN: Duration = Duration::from_secs(24 * 60 * 60);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Encoding {
    /// Efí: `{"grant_type":"client_credentials"}`.
    Json,
    /// RFC 6749 §4.4: `grant_type=client_credentials`.
    Form,
}

struct Token {
    value: Secret,
    renew_at: Instant,
}

#[derive(Default)]
struct State {
    token: Option<Token>,
    /// The body encoding the provider accepted, once one did.
    encoding: Option<Encoding>,
}

pub(super) struct OAuth {
    url: String,
    client_id: String,
    client_secret: Secret,
    state: Mutex<State>,
}

impl fmt::Debug for OAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OAuth").field("url", &self.url).field("client_id", &self.client_id).finish_non_exhaustive()
    }
}

/// What one token request gave.
enum Attempt {
    Issued(Token),
    Refused(StatusCode, bytes::Bytes),
}

impl OAuth {
    pub(super) fn new(url: String, client_id: String, client_secret: Secret) -> Self {
        Self { url, client_id, client_secret, state: Mutex::default() }
    }

    /// The cached token while it is fresh, or a new one.
    pub(super) async fn token(&self, http: &reqwest::Client) -> Result<Secret, GatewayError> {
        let mut state = self.state.lock().await;
        if let Some(token) = &state.token
            && Instant::now() < token.renew_at
        {
            return Ok(token.value.clone());
        }
        self.fetch(http, &mut state).await
    }

    /// A token to replace `rejected`, which the API refused: a new one, unless another caller
    /// has renewed it meanwhile.
    pub(super) async fn renew(&self, http: &reqwest::Client, rejected: &Secret) -> Result<Secret, GatewayError> {
        let mut state = self.state.lock().await;
        if let Some(token) = &state.token
            && token.value != *rejected
            && Instant::now() < token.renew_at
        {
            return Ok(token.value.clone());
        }
        self.fetch(http, &mut state).await
    }

    async fn fetch(&self, http: &reqwest::Client, state: &mut State) -> Result<Secret, GatewayError> {
        state.token = None;
        let first = state.encoding.unwrap_or(Encoding::Json);
        let token = match self.attempt(http, first).await? {
            Attempt::Issued(token) => {
                state.encoding = Some(first);
                token
            }
            Attempt::Refused(status, body)
                if state.encoding.is_none()
                    && matches!(status, StatusCode::BAD_REQUEST | StatusCode::UNSUPPORTED_MEDIA_TYPE) =>
            {
                match self.attempt(http, Encoding::Form).await? {
                    Attempt::Issued(token) => {
                        state.encoding = Some(Encoding::Form);
                        token
                    }
                    Attempt::Refused(form_status, form_body) => {
                        let json = api::provider_text(status, &body);
                        let form = api::provider_text(form_status, &form_body);
                        return Err(self.refused(form_status, format!("{json}; with a form body: {form}")));
                    }
                }
            }
            Attempt::Refused(status, body) => return Err(self.refused(status, api::provider_text(status, &body))),
        };
        tracing::debug!(gateway = "bacen", "access token issued");
        let value = token.value.clone();
        state.token = Some(token);
        Ok(value)
    }

    async fn attempt(&self, http: &reqwest::Client, encoding: Encoding) -> Result<Attempt, GatewayError> {
        let asked_at = Instant::now();
        let request = http
            .post(&self.url)
            .basic_auth(&self.client_id, Some(self.client_secret.expose()))
            .header(ACCEPT, "application/json");
        let request = match encoding {
            Encoding::Json => request.json(&serde_json::json!({ "grant_type": "client_credentials" })),
            Encoding::Form => {
                request.header(CONTENT_TYPE, "application/x-www-form-urlencoded").body("grant_type=client_credentials")
            }
        };
        let response = request.send().await.map_err(|e| api::transport_error(&e))?;
        let status = response.status();
        let body = response.bytes().await.map_err(|e| api::transport_error(&e))?;
        if !status.is_success() {
            return Ok(Attempt::Refused(status, body));
        }
        Ok(Attempt::Issued(issued(&body, asked_at)?))
    }

    fn refused(&self, status: StatusCode, text: String) -> GatewayError {
        let message = format!("the token endpoint refused client_id {:?}: {text}", self.client_id);
        match status.as_u16() {
            408 | 429 | 500..=599 => GatewayError::Unknown(message),
            _ => GatewayError::Unauthorized(message),
        }
    }
}

#[derive(Deserialize)]
struct TokenResponse {
    access_token: String,
    /// A number, or (some providers) a numeric string.
    expires_in: Option<serde_json::Value>,
}

/// The token and its announced lifetime from a `2xx` answer.
fn parse_token(body: &[u8]) -> Result<(Secret, Option<Duration>), GatewayError> {
    let unreadable = |why: String| GatewayError::Unknown(format!("the token endpoint's answer is unreadable: {why}"));
    let parsed: TokenResponse = serde_json::from_slice(body).map_err(|e| unreadable(e.to_string()))?;
    if parsed.access_token.trim().is_empty() {
        return Err(unreadable("access_token is empty".into()));
    }
    let expires_in = parsed.expires_in.and_then(|v| match v {
        serde_json::Value::Number(n) => n.as_u64(),
        serde_json::Value::String(s) => s.trim().parse().ok(),
        _ => None,
    });
    Ok((Secret::new(parsed.access_token), expires_in.map(Duration::from_secs)))
}

/// The token a `2xx` answer to a request made at `asked_at` issues, with its renewal time.
fn issued(body: &[u8], asked_at: Instant) -> Result<Token, GatewayError> {
    let (value, expires_in) = parse_token(body)?;
    Ok(Token { value, renew_at: asked_at + usable_for(expires_in) })
}

/// Reads a token endpoint's `2xx` answer as the gateway does: how long from now the token it
/// issues would be used before renewing it. Public for the fuzz targets; never panics.
pub fn read_token_answer(body: &[u8]) -> Result<Duration, GatewayError> {
    let now = Instant::now();
    issued(body, now).map(|token| token.renew_at - now)
}

/// How long a token that lives `expires_in` is used before renewing it. A lifetime is capped
/// at [`MAX_EXPIRES_IN`]: whatever the provider announces, the renewal time stays a time.
fn usable_for(expires_in: Option<Duration>) -> Duration {
    let life = expires_in.unwrap_or(DEFAULT_EXPIRES_IN).min(MAX_EXPIRES_IN);
    life - EXPIRY_MARGIN.min(life / 2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_renewed_a_margin_before_they_expire() {
        let secs = Duration::from_secs;
        assert_eq!(usable_for(Some(secs(3600))), secs(3540));
        assert_eq!(usable_for(Some(secs(120))), secs(60));
        assert_eq!(usable_for(Some(secs(60))), secs(30));
        assert_eq!(usable_for(Some(secs(0))), secs(0));
        assert_eq!(usable_for(None), secs(240));
    }

    #[test]
    fn an_absurd_lifetime_is_capped_rather_than_overflowing_the_renewal_time() {
        // `asked_at + u64::MAX seconds` used to panic the charge that asked for the token.
        for expires_in in ["18446744073709551615", "\"18446744073709551615\"", "9223372036854775808"] {
            let body = format!(r#"{{"access_token":"abc","expires_in":{expires_in}}}"#);
            assert_eq!(read_token_answer(body.as_bytes()).unwrap(), MAX_EXPIRES_IN - EXPIRY_MARGIN, "{expires_in}");
        }
        let one_hour = read_token_answer(br#"{"access_token":"abc","expires_in":3600}"#).unwrap();
        assert_eq!(one_hour, Duration::from_secs(3540));
    }

    #[test]
    fn reads_the_token_answer_efi_documents() {
        let body = br#"{"access_token":"abc","token_type":"Bearer","expires_in":3600,"scope":"cob.read cob.write"}"#;
        let (token, expires_in) = parse_token(body).unwrap();
        assert_eq!((token.expose(), expires_in), ("abc", Some(Duration::from_secs(3600))));
        let (_, as_text) = parse_token(br#"{"access_token":"abc","expires_in":"600"}"#).unwrap();
        assert_eq!(as_text, Some(Duration::from_secs(600)));
        let (_, absent) = parse_token(br#"{"access_token":"abc"}"#).unwrap();
        assert_eq!(absent, None);
        for bad in [&br#"{"access_token":""}"#[..], b"{}", b"<html>"] {
            assert!(matches!(parse_token(bad), Err(GatewayError::Unknown(m)) if m.contains("unreadable")));
        }
    }

    #[test]
    fn debug_output_never_shows_the_secret() {
        let oauth = OAuth::new("https://psp.test/oauth/token".into(), "client".into(), Secret::new("s3cr3t"));
        let shown = format!("{oauth:?}");
        assert!(shown.contains("client") && !shown.contains("s3cr3t"), "{shown}");
    }
}
