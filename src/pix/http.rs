//! HTTP plumbing shared by the PSP gateways (Asaas, Mercado Pago; Bacen shares the status table,
//! [`status_class`]): the client, URLs built from segments (ids are escaped, never spliced into
//! paths), and one classification of failures:
//! - no answer (timeout, reset, refused connection, a body lost halfway), 5xx, 408 and 429 →
//!   [`GatewayError::Unknown`]: the charge may exist, so the caller looks it up before creating
//!   again. A 429 or a refused connection created nothing, but the lookup is cheap and the
//!   gateway contract has no "retry blindly" class;
//! - 401 and 403 → [`GatewayError::Unauthorized`];
//! - any other 4xx → [`GatewayError::Rejected`] with the provider's own readable message;
//! - a 2xx whose body cannot be read → `Unknown`: the provider acted, we do not know how.

use std::error::Error as _;
use std::time::Duration;

use reqwest::{RequestBuilder, StatusCode, Url};
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::gateway::GatewayError;
use crate::domain::Cents;

/// A customer waits on WhatsApp while a charge is created; past this the outcome is unknown
/// and the caller's retry (lookup first) takes over.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(20);
/// Connecting is quick or it is not happening.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Enough of an unparsed error body to recognise it, not a page of HTML.
const MAX_RAW_TEXT: usize = 200;

pub fn client(timeout: Duration) -> Result<reqwest::Client, GatewayError> {
    reqwest::Client::builder()
        .timeout(timeout)
        .connect_timeout(timeout.min(CONNECT_TIMEOUT))
        .user_agent(concat!("balcao/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| GatewayError::NotConfigured(format!("cannot build the HTTP client: {e}")))
}

/// `base` (which may carry a path prefix) + `segments` (each percent-encoded) + `query`.
pub fn url(base: &Url, segments: &[&str], query: &[(&str, &str)]) -> Result<Url, GatewayError> {
    let mut url = base.clone();
    url.path_segments_mut()
        .map_err(|()| GatewayError::NotConfigured(format!("{base} cannot be a base URL")))?
        .pop_if_empty()
        .extend(segments);
    if !query.is_empty() {
        url.query_pairs_mut().extend_pairs(query);
    }
    Ok(url)
}

/// Parses a configured base URL.
pub fn base_url(raw: &str) -> Result<Url, GatewayError> {
    let url = Url::parse(raw.trim()).map_err(|e| GatewayError::NotConfigured(format!("base_url {raw:?}: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") || url.cannot_be_a_base() {
        return Err(GatewayError::NotConfigured(format!("base_url {raw:?} is not an http(s) URL")));
    }
    Ok(url)
}

/// Sends `request` and reads a JSON answer of type `T`; `readable` picks the provider's
/// message out of an error body.
pub async fn send_json<T: DeserializeOwned>(
    provider: &str,
    request: RequestBuilder,
    readable: fn(&Value) -> Option<String>,
) -> Result<T, GatewayError> {
    let response = request.send().await.map_err(|e| transport(provider, &e))?;
    let status = response.status();
    let body = response.bytes().await.map_err(|e| transport(provider, &e))?;
    read_json(provider, status, &body, readable)
}

/// [`send_json`] for a create sent with an idempotency key: a `409` says a request with the same
/// key is still being processed, which proves the create is known, not that it failed, so the
/// outcome is unknown (look it up, then send the same key again).
pub async fn send_keyed_create<T: DeserializeOwned>(
    provider: &str,
    request: RequestBuilder,
    readable: fn(&Value) -> Option<String>,
) -> Result<T, GatewayError> {
    let response = request.send().await.map_err(|e| transport(provider, &e))?;
    let status = response.status();
    let body = response.bytes().await.map_err(|e| transport(provider, &e))?;
    if status == StatusCode::CONFLICT {
        let parsed: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let message = readable(&parsed).unwrap_or_else(|| raw_text(&body));
        return Err(GatewayError::Unknown(format!("{provider} answered HTTP 409 (the key is in flight): {message}")));
    }
    read_json(provider, status, &body, readable)
}

/// A complete answer read as [`send_json`] does: `T` from a `2xx`, else the classified error.
pub fn read_json<T: DeserializeOwned>(
    provider: &str,
    status: StatusCode,
    body: &[u8],
    readable: fn(&Value) -> Option<String>,
) -> Result<T, GatewayError> {
    if status.is_success() {
        return serde_json::from_slice(body).map_err(|e| {
            GatewayError::Unknown(format!("{provider} answered HTTP {status} but the body is unreadable: {e}"))
        });
    }
    let parsed: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let message = readable(&parsed).unwrap_or_else(|| raw_text(body));
    Err(classify(provider, status, message))
}

/// A failure before a complete answer arrived.
pub fn transport(provider: &str, e: &reqwest::Error) -> GatewayError {
    let what = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "could not be reached"
    } else {
        "broke off"
    };
    let mut chain = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        chain.push_str(": ");
        chain.push_str(&cause.to_string());
        source = cause.source();
    }
    GatewayError::Unknown(format!("the request to {provider} {what}: {chain}"))
}

/// What an error status means for a charge, alike for every gateway.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusClass {
    /// 401, 403: the credentials.
    Unauthorized,
    /// 408, 429, 5xx: the charge may exist, or a retry may create it; look it up first.
    Unknown,
    /// A 3xx the client did not (or could no longer) follow: each gateway says what it means.
    Redirect,
    /// Any other status: the provider refused the request.
    Rejected,
}

/// The one table of what a provider's error status means.
pub fn status_class(status: StatusCode) -> StatusClass {
    match status.as_u16() {
        401 | 403 => StatusClass::Unauthorized,
        408 | 429 | 500..=599 => StatusClass::Unknown,
        300..=399 => StatusClass::Redirect,
        _ => StatusClass::Rejected,
    }
}

/// An error answer of Asaas or Mercado Pago, whose clients follow redirects: one still standing
/// after the client's limit may have acted, so it is unknown too.
pub fn classify(provider: &str, status: StatusCode, message: String) -> GatewayError {
    match status_class(status) {
        StatusClass::Unauthorized => {
            GatewayError::Unauthorized(format!("{provider} answered HTTP {status}: {message}"))
        }
        StatusClass::Rejected if status.is_client_error() => {
            GatewayError::Rejected(format!("{message} ({provider}, HTTP {})", status.as_u16()))
        }
        // A status outside 4xx that is no error class of its own (1xx, 6xx and beyond) proves
        // nothing was created: look it up like a 5xx.
        StatusClass::Rejected | StatusClass::Unknown | StatusClass::Redirect => {
            GatewayError::Unknown(format!("{provider} answered HTTP {status}: {message}"))
        }
    }
}

/// An amount as the JSON number PSPs take (`45.5` for R$ 45,50). Cents over 100 is the double
/// nearest the decimal, and serde writes the shortest text that reads back as it, so no
/// `45.499999` ever leaves.
pub fn reais(amount: Cents) -> Result<f64, GatewayError> {
    if amount.0 <= 0 {
        return Err(GatewayError::Rejected(format!("the amount must be positive, not {amount}")));
    }
    Ok(amount.0 as f64 / 100.0)
}

fn raw_text(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    if text.is_empty() {
        return "no message".to_owned();
    }
    match text.char_indices().nth(MAX_RAW_TEXT) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// What every gateway answers for these statuses, whatever its client: the tests of each
    /// gateway's classifier run through them (and add their own).
    pub(crate) const EVERY_GATEWAY: [(u16, &str); 9] = [
        (400, "rejected"),
        (404, "rejected"),
        (422, "rejected"),
        (401, "unauthorized"),
        (403, "unauthorized"),
        (408, "unknown"),
        (429, "unknown"),
        (500, "unknown"),
        (503, "unknown"),
    ];

    /// The class of an error, as the tables above name it.
    pub(crate) fn class_name(e: &GatewayError) -> &'static str {
        match e {
            GatewayError::Unauthorized(_) => "unauthorized",
            GatewayError::Unknown(_) => "unknown",
            GatewayError::Rejected(_) => "rejected",
            GatewayError::NotConfigured(_) => "not configured",
            GatewayError::WindowClosed => "window closed",
        }
    }

    #[test]
    fn statuses_map_to_the_gateway_classes() {
        for (code, expected) in EVERY_GATEWAY.into_iter().chain([(502, "unknown")]) {
            let e = classify("psp", StatusCode::from_u16(code).unwrap(), "why".into());
            if let GatewayError::Rejected(m) = &e {
                assert_eq!(m, &format!("why (psp, HTTP {code})"));
            }
            assert_eq!(class_name(&e), expected, "HTTP {code}");
        }
    }

    #[test]
    fn urls_escape_segments_and_keep_the_base_path() {
        let base = base_url("http://127.0.0.1:9/prefix/").unwrap();
        let url = url(&base, &["v3", "payments", "pay_1/../x"], &[("externalReference", "a b&c")]).unwrap();
        assert_eq!(url.as_str(), "http://127.0.0.1:9/prefix/v3/payments/pay_1%2F..%2Fx?externalReference=a+b%26c");
        assert!(base_url("mailto:x@y.z").is_err());
        assert!(base_url("not a url").is_err());
    }

    #[test]
    fn amounts_are_exact_decimals() {
        for (cents, text) in [(4550, "45.5"), (10, "0.1"), (10090, "100.9"), (1, "0.01"), (999_999_999, "9999999.99")] {
            assert_eq!(serde_json::json!(reais(Cents(cents)).unwrap()).to_string(), text);
        }
        assert!(matches!(reais(Cents(0)), Err(GatewayError::Rejected(m)) if m.contains("positive")));
    }

    #[test]
    fn raw_text_is_cut_on_a_character_boundary() {
        let long = "é".repeat(MAX_RAW_TEXT + 10);
        assert_eq!(raw_text(long.as_bytes()).chars().count(), MAX_RAW_TEXT + 1);
        assert_eq!(raw_text(b"  "), "no message");
    }
}
