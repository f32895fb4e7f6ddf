//! Speech to text over the OpenAI-compatible `POST /v1/audio/transcriptions` (OpenAI,
//! whisper.cpp's server, faster-whisper's servers): a multipart form with `file`, `model`,
//! `language` and `response_format=json`, answered with `{"text": …}`.
//!
//! Each attempt has the client's timeout; a timeout, a refused connection, 429 and 5xx are
//! tried again (at most [`ATTEMPTS`] times, backing off), anything else is final. The caller
//! keeps the result, so a transcription happens once per message however often its turn runs.

use std::time::Duration;

use reqwest::multipart::{Form, Part};
use serde::Deserialize;

use crate::domain::{Backoff, GaveUp, Secret, Try, retried};

/// Attempts per transcription, the first included.
pub const ATTEMPTS: u32 = 3;
/// Waits between attempts: about half a second, then a second.
const BACKOFF: Backoff = Backoff { base: Duration::from_millis(500), max: Duration::from_secs(4) };

#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum TranscriptionError {
    /// Still failing (timeouts, 5xx) after every attempt.
    #[error("transcription unavailable: {0}")]
    Unavailable(String),
    /// The endpoint refused the request (4xx): retrying would not help.
    #[error("transcription refused: {0}")]
    Refused(String),
    /// It answered, with no words in it.
    #[error("transcription is empty")]
    Empty,
}

/// An OpenAI-compatible transcription endpoint.
#[derive(Clone)]
pub struct Transcriber {
    http: reqwest::Client,
    endpoint: String,
    model: String,
    api_key: Option<Secret>,
}

impl std::fmt::Debug for Transcriber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transcriber").field("endpoint", &self.endpoint).field("model", &self.model).finish()
    }
}

#[derive(Deserialize)]
struct Transcription {
    text: String,
}

#[derive(Deserialize)]
struct ErrorEnvelope {
    error: ErrorBody,
}

#[derive(Deserialize)]
struct ErrorBody {
    message: Option<String>,
}

/// The endpoint for a configured URL: taken as is when it names the transcriptions path, else
/// that path is added to the base (`https://api.openai.com/v1`, `http://127.0.0.1:8000`).
pub fn endpoint(url: &str) -> String {
    let url = url.trim_end_matches('/');
    if url.ends_with("/audio/transcriptions") {
        url.to_owned()
    } else if url.ends_with("/v1") {
        format!("{url}/audio/transcriptions")
    } else {
        format!("{url}/v1/audio/transcriptions")
    }
}

impl Transcriber {
    pub fn new(url: &str, model: &str, api_key: Option<Secret>, timeout: Duration) -> reqwest::Result<Self> {
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout.min(Duration::from_secs(5)))
            .user_agent(concat!("balcao/", env!("CARGO_PKG_VERSION")))
            .build()?;
        Ok(Self { http, endpoint: endpoint(url), model: model.to_owned(), api_key })
    }

    /// The words in `audio` (Brazilian Portuguese), trimmed.
    pub async fn transcribe(&self, audio: &[u8], mime_type: &str) -> Result<String, TranscriptionError> {
        let text = retried(ATTEMPTS, BACKOFF, "transcription", || self.attempt(audio, mime_type)).await.map_err(
            |e| match e {
                GaveUp::Exhausted(reason) => TranscriptionError::Unavailable(reason),
                GaveUp::Final(reason) => TranscriptionError::Refused(reason),
            },
        )?;
        match text.trim() {
            "" => Err(TranscriptionError::Empty),
            text => Ok(text.to_owned()),
        }
    }

    async fn attempt(&self, audio: &[u8], mime_type: &str) -> Result<String, Try<String>> {
        let file = Part::bytes(audio.to_vec())
            .file_name(format!("voice.{}", extension(mime_type)))
            .mime_str(mime_type)
            .map_err(|e| Try::Final(format!("MIME type {mime_type:?}: {e}")))?;
        let form = Form::new()
            .part("file", file)
            .text("model", self.model.clone())
            .text("language", "pt")
            .text("response_format", "json");
        let mut request = self.http.post(&self.endpoint).multipart(form);
        if let Some(key) = &self.api_key {
            request = request.bearer_auth(key.expose());
        }
        let response = request.send().await.map_err(|e| Try::Again(e.without_url().to_string()))?;
        let status = response.status();
        let body = response.bytes().await.map_err(|e| Try::Again(e.without_url().to_string()))?;
        if status.is_success() {
            return serde_json::from_slice::<Transcription>(&body)
                .map(|t| t.text)
                .map_err(|e| Try::Final(format!("unreadable answer: {e}")));
        }
        let message = serde_json::from_slice::<ErrorEnvelope>(&body)
            .ok()
            .and_then(|e| e.error.message)
            .unwrap_or_else(|| String::from_utf8_lossy(&body).chars().take(200).collect());
        let reason = format!("HTTP {status}: {message}");
        if status.as_u16() == 429 || status.is_server_error() {
            Err(Try::Again(reason))
        } else {
            Err(Try::Final(reason))
        }
    }
}

/// A file name's extension for the MIME type: some servers pick the decoder by it.
fn extension(mime_type: &str) -> &'static str {
    match mime_type.split(';').next().unwrap_or_default().trim() {
        "audio/ogg" => "ogg",
        "audio/mpeg" => "mp3",
        "audio/mp4" => "m4a",
        "audio/aac" => "aac",
        "audio/amr" => "amr",
        "audio/wav" | "audio/x-wav" => "wav",
        _ => "bin",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_accepts_a_base_or_the_full_path() {
        assert_eq!(endpoint("https://api.openai.com/v1"), "https://api.openai.com/v1/audio/transcriptions");
        assert_eq!(endpoint("http://127.0.0.1:8000/"), "http://127.0.0.1:8000/v1/audio/transcriptions");
        assert_eq!(
            endpoint("http://127.0.0.1:8080/v1/audio/transcriptions"),
            "http://127.0.0.1:8080/v1/audio/transcriptions"
        );
    }

    #[test]
    fn extension_follows_the_mime_type() {
        assert_eq!(extension("audio/ogg; codecs=opus"), "ogg");
        assert_eq!(extension("audio/mpeg"), "mp3");
        assert_eq!(extension("application/x-foo"), "bin");
    }
}
