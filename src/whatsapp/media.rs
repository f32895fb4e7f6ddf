//! Downloading a customer's media: `GET {api_url}/{media-id}` answers the file's temporary URL,
//! MIME type and size; `GET {url}` with the same Bearer token answers the bytes.
//!
//! Limits are checked before the bytes come (the announced size and type) and while they come
//! (a body longer than the limit is cut off and refused), so a large file is never held in
//! memory. A timeout, a refused connection, 429 or 5xx is tried again, at most [`ATTEMPTS`]
//! times; anything else is final. The token is sent only for a numeric media id and to an
//! https URL (or the Graph API's own origin).

use std::time::Duration;

use serde::Deserialize;

use super::GraphClient;
use crate::domain::{Backoff, GaveUp, Secret, Try, retried};

/// What WhatsApp accepts for audio, and so what a customer's audio can be (Meta's media page).
pub const AUDIO_TYPES: &[&str] = &["audio/aac", "audio/amr", "audio/mpeg", "audio/mp4", "audio/ogg"];
/// WhatsApp's limit for audio files.
pub const AUDIO_MAX_BYTES: u64 = 16 * 1024 * 1024;
/// Attempts per download, the first included.
pub const ATTEMPTS: u32 = 3;
const BACKOFF: Backoff = Backoff { base: Duration::from_millis(500), max: Duration::from_secs(4) };

/// A downloaded file.
#[derive(Debug, Clone)]
pub struct Media {
    pub bytes: Vec<u8>,
    /// As Meta gave it, parameters included (`audio/ogg; codecs=opus`).
    pub mime_type: String,
}

#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum MediaError {
    #[error("the file has {size} bytes, over the {max} allowed")]
    TooLarge { size: u64, max: u64 },
    #[error("the file's type {0:?} is not an allowed one")]
    Type(String),
    #[error("media unavailable: {0}")]
    Unavailable(String),
    #[error("media refused: {0}")]
    Refused(String),
}

impl MediaError {
    /// A short name for the stored reason.
    pub fn code(&self) -> &'static str {
        match self {
            Self::TooLarge { .. } => "too_large",
            Self::Type(_) => "unsupported_type",
            Self::Unavailable(_) => "media_unavailable",
            Self::Refused(_) => "media_refused",
        }
    }
}

#[derive(Deserialize)]
struct MediaInfo {
    url: String,
    mime_type: String,
    /// A string in Meta's documentation (`"303833"`), a number in some answers: both are read.
    file_size: Option<serde_json::Value>,
}

impl MediaInfo {
    fn size(&self) -> Option<u64> {
        match self.file_size.as_ref()? {
            serde_json::Value::String(s) => s.trim().parse().ok(),
            other => other.as_u64(),
        }
    }
}

impl GraphClient {
    /// Downloads media `media_id` if its type is one of `types` and it has at most `max` bytes.
    pub async fn download_media(
        &self,
        token: &Secret,
        media_id: &str,
        types: &[&str],
        max: u64,
    ) -> Result<Media, MediaError> {
        retried(ATTEMPTS, BACKOFF, "media download", || self.download_once(token, media_id, types, max)).await.map_err(
            |e| match e {
                GaveUp::Exhausted(reason) => MediaError::Unavailable(reason),
                GaveUp::Final(e) => e,
            },
        )
    }

    async fn download_once(
        &self,
        token: &Secret,
        media_id: &str,
        types: &[&str],
        max: u64,
    ) -> Result<Media, Try<MediaError>> {
        // Meta's media ids are numbers; anything else is not put in a URL with our token.
        if media_id.is_empty() || media_id.len() > 32 || !media_id.bytes().all(|b| b.is_ascii_digit()) {
            return Err(Try::Final(MediaError::Refused(format!("not a media id: {media_id:?}"))));
        }
        let url = format!("{}/{media_id}", self.base_url);
        let response = self.http.get(url).bearer_auth(token.expose()).send().await.map_err(transport)?;
        let status = response.status();
        let body = response.bytes().await.map_err(transport)?;
        if !status.is_success() {
            return Err(refusal(status, &String::from_utf8_lossy(&body)));
        }
        let info: MediaInfo = serde_json::from_slice(&body)
            .map_err(|e| Try::Final(MediaError::Refused(format!("unreadable media answer: {e}"))))?;
        let base_type = info.mime_type.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
        if !types.contains(&base_type.as_str()) {
            return Err(Try::Final(MediaError::Type(info.mime_type)));
        }
        if let Some(size) = info.size().filter(|size| *size > max) {
            return Err(Try::Final(MediaError::TooLarge { size, max }));
        }
        // The token goes only over https, or to the Graph API's own origin (a local test server).
        if !(info.url.starts_with("https://") || info.url.starts_with(&format!("{}/", origin(&self.base_url)))) {
            return Err(Try::Final(MediaError::Refused("the media URL is not https".to_owned())));
        }
        let mut response = self.http.get(&info.url).bearer_auth(token.expose()).send().await.map_err(transport)?;
        let status = response.status();
        if !status.is_success() {
            return Err(refusal(status, "download refused"));
        }
        if let Some(size) = response.content_length().filter(|size| *size > max) {
            return Err(Try::Final(MediaError::TooLarge { size, max }));
        }
        let mut bytes = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(transport)? {
            bytes.extend_from_slice(&chunk);
            if bytes.len() as u64 > max {
                return Err(Try::Final(MediaError::TooLarge { size: bytes.len() as u64, max }));
            }
        }
        Ok(Media { bytes, mime_type: info.mime_type })
    }
}

/// `scheme://host[:port]` of a URL.
fn origin(url: &str) -> &str {
    let after_scheme = url.find("://").map_or(0, |i| i + 3);
    url[after_scheme..].find('/').map_or(url, |end| &url[..after_scheme + end])
}

fn transport(e: reqwest::Error) -> Try<MediaError> {
    Try::Again(e.without_url().to_string())
}

fn refusal(status: reqwest::StatusCode, body: &str) -> Try<MediaError> {
    let reason = format!("HTTP {status}: {}", body.chars().take(200).collect::<String>());
    if status.as_u16() == 429 || status.is_server_error() {
        Try::Again(reason)
    } else {
        Try::Final(MediaError::Refused(reason))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn origin_is_scheme_and_host() {
        assert_eq!(super::origin("http://127.0.0.1:4000/v25.0"), "http://127.0.0.1:4000");
        assert_eq!(super::origin("https://graph.facebook.com"), "https://graph.facebook.com");
    }
}
