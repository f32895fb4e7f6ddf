//! A loopback OpenAI-compatible `POST /v1/audio/transcriptions`, written from OpenAI's reference:
//! a multipart form whose `file` (with a file name of a supported format) and `model` are
//! required, `Authorization: Bearer` checked, `{"text": …}` answered; errors in OpenAI's envelope
//! (`invalid_request_error`, `invalid_api_key`). It hears what the test said a clip says
//! ([`FakeTranscription::hears`]); an unknown clip is silence (`""`).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::json;

use crate::support::fake_graph::parse_multipart;

/// The formats OpenAI accepts, by file extension.
const FORMATS: &[&str] = &["flac", "m4a", "mp3", "mp4", "mpeg", "mpga", "oga", "ogg", "wav", "webm"];
pub const API_KEY: &str = "sk-transcribe-test";

#[derive(Debug, Clone)]
pub enum Reply {
    /// Answers after this long (past the client's timeout: a hang).
    Delay(Duration),
    /// A bare status with OpenAI's error envelope.
    Error(u16),
}

/// One request as far as the form could be read.
#[derive(Debug, Clone)]
pub struct Request {
    pub model: Option<String>,
    pub language: Option<String>,
    pub file_name: Option<String>,
    pub file: Vec<u8>,
}

#[derive(Default)]
struct Inner {
    script: VecDeque<Reply>,
    clips: HashMap<Vec<u8>, String>,
    requests: Vec<Request>,
}

#[derive(Clone)]
pub struct FakeTranscription {
    /// The base URL (`…/v1`), as an operator would configure it.
    pub url: String,
    inner: Arc<Mutex<Inner>>,
}

impl FakeTranscription {
    pub async fn start() -> Self {
        let inner = Arc::new(Mutex::new(Inner::default()));
        let app = axum::Router::new().route("/v1/audio/transcriptions", post(transcribe)).with_state(inner.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind fake transcription");
        let url = format!("http://{}/v1", listener.local_addr().expect("addr"));
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self { url, inner }
    }

    /// What `clip` says.
    pub fn hears(&self, clip: &[u8], text: &str) {
        self.inner.lock().expect("lock").clips.insert(clip.to_vec(), text.to_owned());
    }

    /// Replies for the next requests; once empty, clips are heard.
    pub fn script(&self, replies: impl IntoIterator<Item = Reply>) {
        self.inner.lock().expect("lock").script.extend(replies);
    }

    pub fn requests(&self) -> Vec<Request> {
        self.inner.lock().expect("lock").requests.clone()
    }

    /// The config variables pointing at this fake.
    pub fn vars(&self) -> Vec<(&'static str, String)> {
        vec![
            ("BALCAO_TRANSCRIPTION_URL", self.url.clone()),
            ("BALCAO_TRANSCRIPTION_MODEL", "whisper-1".to_owned()),
            ("BALCAO_TRANSCRIPTION_API_KEY", API_KEY.to_owned()),
        ]
    }
}

fn error(status: u16, kind: &str, message: &str, param: Option<&str>) -> Response {
    let code = if status == 401 { json!("invalid_api_key") } else { json!(null) };
    let body = json!({ "error": { "message": message, "type": kind, "param": param, "code": code } });
    (StatusCode::from_u16(status).expect("status"), Json(body)).into_response()
}

async fn transcribe(State(inner): State<Arc<Mutex<Inner>>>, headers: HeaderMap, body: Bytes) -> Response {
    let bearer = headers.get("authorization").and_then(|v| v.to_str().ok());
    if bearer != Some(&format!("Bearer {API_KEY}")) {
        return error(401, "invalid_request_error", "Incorrect API key provided.", None);
    }
    let content_type = headers.get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default();
    let parts = match parse_multipart(content_type, &body) {
        Ok(parts) => parts,
        Err(e) => return error(400, "invalid_request_error", &format!("Could not parse multipart form: {e}"), None),
    };
    let field =
        |name: &str| parts.iter().find(|p| p.name == name).map(|p| String::from_utf8_lossy(&p.body).into_owned());
    let file = parts.iter().find(|p| p.name == "file");
    let request = Request {
        model: field("model"),
        language: field("language"),
        file_name: file.and_then(|f| f.file_name.clone()),
        file: file.map(|f| f.body.clone()).unwrap_or_default(),
    };
    let (reply, heard) = {
        let mut inner = inner.lock().expect("lock");
        inner.requests.push(request.clone());
        let heard = inner.clips.get(&request.file).cloned().unwrap_or_default();
        (inner.script.pop_front(), heard)
    };
    let Some(name) = request.file_name.filter(|_| file.is_some()) else {
        return error(400, "invalid_request_error", "you must provide a file", Some("file"));
    };
    if request.model.is_none() {
        return error(400, "invalid_request_error", "you must provide a model parameter", Some("model"));
    }
    let extension = name.rsplit('.').next().unwrap_or_default().to_ascii_lowercase();
    if !FORMATS.contains(&extension.as_str()) {
        let message = format!("Invalid file format. Supported formats: {FORMATS:?}");
        return error(400, "invalid_request_error", &message, None);
    }
    match reply {
        Some(Reply::Delay(delay)) => tokio::time::sleep(delay).await,
        Some(Reply::Error(status)) => return error(status, "server_error", "The server had an error", None),
        None => {}
    }
    Json(json!({ "text": heard, "usage": { "type": "duration", "seconds": 3 } })).into_response()
}
