//! The Graph API client: `POST {api_url}/{phone_number_id}/messages` and
//! `POST {api_url}/{phone_number_id}/media` with a Bearer token.
//!
//! It makes one attempt and classifies the result; the outbox owns retries, because its
//! backoff is durable and survives a restart. The classes follow Meta's error codes, not
//! HTTP statuses, as Meta asks:
//! - not sent, retry later: connection refused, 429, 5xx and the throughput codes;
//! - outcome unknown: a timeout or a lost response after the request went out;
//! - permanent: 131047 (outside the 24-hour window) and every other error.
//!
//! An upload is not a message: one whose outcome is unknown is simply retried (the worst case is
//! an unused media file at Meta), so uploads never answer "outcome unknown".

use std::time::Duration;

use reqwest::StatusCode;
use reqwest::multipart::{Form, Part};
use serde::Deserialize;

use super::message::{MessageError, OutboundMessage, Recipient, UploadedImage};
use crate::domain::Secret;

/// Meta codes that mean "try again later": throughput, pair rate, account rate limits,
/// maintenance and generic service errors.
const TRANSIENT_CODES: &[i64] = &[1, 2, 4, 80007, 130429, 131000, 131016, 131056, 131057];
/// "More than 24 hours have passed since the recipient last replied."
pub const OUTSIDE_WINDOW_CODE: i64 = 131047;
/// Honour at most this much of a `Retry-After` header.
const RETRY_AFTER_MAX: Duration = Duration::from_secs(300);

#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum SendError {
    #[error("not sent, retry later: {reason}")]
    Retry { reason: String, retry_after: Option<Duration> },
    #[error("outcome unknown: {reason}")]
    Unknown { reason: String },
    #[error("permanent failure: {reason}")]
    Permanent { code: Option<i64>, reason: String },
    #[error("invalid message: {0}")]
    Invalid(#[from] MessageError),
}

impl SendError {
    /// The same class with `context` in front of the reason. An invalid message becomes a
    /// permanent failure, so the context can be told.
    pub fn context(self, context: &str) -> Self {
        match self {
            Self::Retry { reason, retry_after } => Self::Retry { reason: format!("{context}: {reason}"), retry_after },
            Self::Unknown { reason } => Self::Unknown { reason: format!("{context}: {reason}") },
            Self::Permanent { code, reason } => Self::Permanent { code, reason: format!("{context}: {reason}") },
            Self::Invalid(e) => Self::Permanent { code: None, reason: format!("{context}: {e}") },
        }
    }
}

#[derive(Clone, Debug)]
pub struct GraphClient {
    pub(super) http: reqwest::Client,
    pub(super) base_url: String,
}

#[derive(Deserialize)]
struct SendResponse {
    #[serde(default)]
    messages: Vec<SentMessage>,
}

#[derive(Deserialize)]
struct SentMessage {
    id: String,
}

#[derive(Deserialize)]
struct UploadResponse {
    id: String,
}

#[derive(Deserialize)]
struct ErrorEnvelope {
    error: GraphError,
}

#[derive(Deserialize)]
struct GraphError {
    code: Option<i64>,
    message: Option<String>,
    error_data: Option<ErrorData>,
    fbtrace_id: Option<String>,
}

#[derive(Deserialize)]
struct ErrorData {
    details: Option<String>,
}

impl GraphClient {
    pub fn new(base_url: &str, timeout: Duration) -> reqwest::Result<Self> {
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout.min(Duration::from_secs(5)))
            .user_agent(concat!("balcao/", env!("CARGO_PKG_VERSION")))
            .build()?;
        Ok(Self { http, base_url: base_url.trim_end_matches('/').to_owned() })
    }

    /// Sends one message and returns its wamid.
    pub async fn send(
        &self,
        phone_number_id: &str,
        token: &Secret,
        to: &Recipient,
        message: &OutboundMessage,
        callback_data: &str,
    ) -> Result<String, SendError> {
        message.validate()?;
        self.post_message(phone_number_id, token, &message.to_graph_json(to, callback_data)?).await
    }

    /// Sends an image uploaded with [`GraphClient::upload_media`] and returns its wamid.
    pub async fn send_image(
        &self,
        phone_number_id: &str,
        token: &Secret,
        to: &Recipient,
        image: &UploadedImage,
        callback_data: &str,
    ) -> Result<String, SendError> {
        image.validate()?;
        self.post_message(phone_number_id, token, &image.to_graph_json(to, callback_data)).await
    }

    /// Uploads a media file (multipart: `messaging_product`, `type`, `file`) and returns the
    /// media id that messages reference. Failures are classified like sends, except that an
    /// unknown outcome is a plain retry (see the module docs).
    pub async fn upload_media(
        &self,
        phone_number_id: &str,
        token: &Secret,
        bytes: Vec<u8>,
        mime: &str,
    ) -> Result<String, SendError> {
        self.upload(phone_number_id, token, bytes, mime).await.map_err(|e| match e {
            SendError::Unknown { reason } => SendError::Retry { reason, retry_after: None },
            other => other,
        })
    }

    async fn upload(
        &self,
        phone_number_id: &str,
        token: &Secret,
        bytes: Vec<u8>,
        mime: &str,
    ) -> Result<String, SendError> {
        let context = |e: SendError| e.context("media upload");
        let extension = mime.rsplit('/').next().filter(|e| !e.is_empty()).unwrap_or("bin");
        let file = Part::bytes(bytes)
            .file_name(format!("upload.{extension}"))
            .mime_str(mime)
            .map_err(|e| SendError::Permanent { code: None, reason: format!("invalid media type {mime:?}: {e}") })
            .map_err(context)?;
        let form = Form::new().text("messaging_product", "whatsapp").text("type", mime.to_owned()).part("file", file);
        let url = format!("{}/{}/media", self.base_url, phone_number_id);
        let response = self
            .http
            .post(url)
            .bearer_auth(token.expose())
            .multipart(form)
            .send()
            .await
            .map_err(|e| context(classify_transport(e)))?;
        let status = response.status();
        let retry_after = retry_after(&response);
        let body = response.bytes().await.map_err(|e| {
            context(SendError::Unknown { reason: format!("response body lost after HTTP {status}: {e}") })
        })?;
        if status.is_success() {
            let parsed: UploadResponse = serde_json::from_slice(&body).map_err(|e| {
                context(SendError::Unknown {
                    reason: format!("accepted (HTTP {status}) but the response has no readable media id: {e}"),
                })
            })?;
            return Ok(parsed.id);
        }
        Err(context(classify_error(status, &body, retry_after)))
    }

    async fn post_message(
        &self,
        phone_number_id: &str,
        token: &Secret,
        body: &serde_json::Value,
    ) -> Result<String, SendError> {
        let url = format!("{}/{}/messages", self.base_url, phone_number_id);
        let response =
            self.http.post(url).bearer_auth(token.expose()).json(body).send().await.map_err(classify_transport)?;
        let status = response.status();
        let retry_after = retry_after(&response);
        let body = response
            .bytes()
            .await
            .map_err(|e| SendError::Unknown { reason: format!("response body lost after HTTP {status}: {e}") })?;
        read_send_answer(status, &body, retry_after)
    }
}

/// Reads the Graph API's answer to a message send as the client does: the new message's id,
/// or the failure classified (retry, unknown, permanent). Public for the fuzz targets; never
/// panics.
pub fn read_send_answer(status: StatusCode, body: &[u8], retry_after: Option<Duration>) -> Result<String, SendError> {
    if status.is_success() {
        let parsed: SendResponse = serde_json::from_slice(body).map_err(|e| SendError::Unknown {
            reason: format!("accepted (HTTP {status}) but the response is unreadable: {e}"),
        })?;
        return parsed
            .messages
            .into_iter()
            .next()
            .map(|m| m.id)
            .ok_or_else(|| SendError::Unknown { reason: "accepted but the response has no message id".to_owned() });
    }
    Err(classify_error(status, body, retry_after))
}

fn classify_transport(e: reqwest::Error) -> SendError {
    if e.is_connect() {
        // Nothing reached Meta.
        SendError::Retry { reason: format!("connection failed: {e}"), retry_after: None }
    } else if e.is_timeout() {
        SendError::Unknown { reason: format!("timed out: {e}") }
    } else {
        SendError::Unknown { reason: format!("request failed: {e}") }
    }
}

fn retry_after(response: &reqwest::Response) -> Option<Duration> {
    let secs: u64 = response.headers().get(reqwest::header::RETRY_AFTER)?.to_str().ok()?.trim().parse().ok()?;
    Some(Duration::from_secs(secs).min(RETRY_AFTER_MAX))
}

fn classify_error(status: StatusCode, body: &[u8], retry_after: Option<Duration>) -> SendError {
    let error = serde_json::from_slice::<ErrorEnvelope>(body).ok().map(|e| e.error);
    let code = error.as_ref().and_then(|e| e.code);
    let reason = match &error {
        Some(e) => format!(
            "HTTP {status}, code {}: {}{}{}",
            code.map(|c| c.to_string()).unwrap_or_else(|| "?".into()),
            e.message.as_deref().unwrap_or("no message"),
            e.error_data.as_ref().and_then(|d| d.details.as_deref()).map(|d| format!(" ({d})")).unwrap_or_default(),
            e.fbtrace_id.as_deref().map(|t| format!(" [fbtrace_id {t}]")).unwrap_or_default(),
        ),
        None => format!("HTTP {status}: {}", String::from_utf8_lossy(&body[..body.len().min(200)])),
    };
    let transient = status == StatusCode::TOO_MANY_REQUESTS
        || status.is_server_error()
        || code.is_some_and(|c| TRANSIENT_CODES.contains(&c));
    if transient {
        SendError::Retry { reason, retry_after }
    } else if code == Some(OUTSIDE_WINDOW_CODE) {
        SendError::Permanent {
            code,
            reason: format!("outside the 24-hour customer service window, a template is required: {reason}"),
        }
    } else {
        SendError::Permanent { code, reason }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_by_code() {
        let body = |code: i64| {
            format!(r#"{{"error":{{"message":"(#{code}) x","type":"OAuthException","code":{code},"fbtrace_id":"A"}}}}"#)
        };
        assert!(matches!(
            classify_error(StatusCode::BAD_REQUEST, body(130429).as_bytes(), None),
            SendError::Retry { .. }
        ));
        assert!(matches!(
            classify_error(StatusCode::BAD_REQUEST, body(131047).as_bytes(), None),
            SendError::Permanent { code: Some(131047), .. }
        ));
        assert!(matches!(
            classify_error(StatusCode::BAD_REQUEST, body(131009).as_bytes(), None),
            SendError::Permanent { .. }
        ));
        assert!(matches!(classify_error(StatusCode::BAD_GATEWAY, b"<html>", None), SendError::Retry { .. }));
        assert!(matches!(classify_error(StatusCode::TOO_MANY_REQUESTS, b"", None), SendError::Retry { .. }));
    }

    #[test]
    fn context_keeps_the_class() {
        let retry = SendError::Retry { reason: "HTTP 503".into(), retry_after: Some(Duration::from_secs(2)) };
        assert_eq!(
            retry.context("media upload"),
            SendError::Retry { reason: "media upload: HTTP 503".into(), retry_after: Some(Duration::from_secs(2)) }
        );
        let permanent = SendError::Permanent { code: Some(131009), reason: "bad".into() };
        assert!(
            matches!(permanent.context("x"), SendError::Permanent { code: Some(131009), reason } if reason == "x: bad")
        );
        let invalid = SendError::Invalid(MessageError::Empty { what: "text body" });
        assert!(
            matches!(invalid.context("x"), SendError::Permanent { code: None, reason } if reason == "x: text body is empty")
        );
    }
}
