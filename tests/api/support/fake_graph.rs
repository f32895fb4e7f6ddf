//! A loopback Graph API: records every send and media upload and answers as told (success, 429,
//! 5xx, a Meta error code, or a hang past the client's timeout after the request arrived).
//!
//! `POST /{phone_number_id}/messages` takes JSON; `POST /{phone_number_id}/media` takes the
//! documented multipart form (`messaging_product`, `type`, `file`) and answers `{ "id": … }`.
//! A customer's media ([`FakeGraph::add_media`]) is served as Meta does: `GET /{media-id}`
//! answers `url`, `mime_type`, `sha256`, `file_size` (a string, as Meta's docs show) and `id`;
//! the URL answers the bytes. Both need the Bearer token; an unknown id gets Meta's code 100.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

#[derive(Debug, Clone)]
pub enum Reply {
    Accept,
    /// HTTP status and a Meta error code.
    Error(u16, i64),
    /// A bare status without a JSON body (a proxy's 502, say).
    Status(u16),
    /// Records the request, then never answers in time.
    Hang,
}

#[derive(Debug, Clone)]
pub struct Send {
    pub phone_number_id: String,
    pub authorization: Option<String>,
    pub body: Value,
}

/// One `POST /{phone_number_id}/media`, as far as the form could be read.
#[derive(Debug, Clone)]
pub struct Upload {
    pub phone_number_id: String,
    pub authorization: Option<String>,
    /// The `messaging_product` field.
    pub messaging_product: Option<String>,
    /// The `type` field (the media's MIME type).
    pub media_type: Option<String>,
    /// The `file` part's filename and its own `Content-Type`.
    pub file_name: Option<String>,
    pub file_content_type: Option<String>,
    pub file: Vec<u8>,
}

impl Upload {
    pub fn is_png(&self) -> bool {
        self.file.starts_with(b"\x89PNG\r\n\x1a\n")
    }
}

#[derive(Default)]
struct Inner {
    script: VecDeque<Reply>,
    sends: Vec<Send>,
    next_id: u64,
    upload_script: VecDeque<Reply>,
    uploads: Vec<Upload>,
    next_media_id: u64,
    /// Replies for every send of an `interactive.type`, ahead of the script.
    by_interactive_type: HashMap<String, Reply>,
    /// Customers' media by id: announced size (when it differs from the bytes'), type, bytes.
    media: HashMap<String, StoredMedia>,
    /// Every `GET /{media-id}` and download, by media id.
    media_gets: Vec<String>,
    downloads: Vec<String>,
    /// The next `GET /{media-id}` answer this status (a Graph outage), this many times.
    media_outage: Option<(usize, u16)>,
}

#[derive(Clone)]
struct StoredMedia {
    mime_type: String,
    bytes: Vec<u8>,
    announced_size: Option<u64>,
}

#[derive(Clone)]
pub struct FakeGraph {
    pub url: String,
    inner: Arc<Mutex<Inner>>,
}

impl FakeGraph {
    pub async fn start() -> Self {
        let inner = Arc::new(Mutex::new(Inner::default()));
        let app = axum::Router::new()
            .route("/{phone_number_id}/messages", post(messages))
            .route("/{phone_number_id}/media", post(media))
            .route("/{media_id}", get(media_info))
            .with_state(inner.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind fake graph");
        let root = format!("http://{}", listener.local_addr().expect("addr"));
        let url = format!("{root}/v25.0");
        let app = axum::Router::new()
            .nest("/v25.0", app)
            .route("/whatsapp_business/attachments/{media_id}", get(download))
            .with_state(inner.clone());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self { url, inner }
    }

    /// Queues replies for the next sends; once empty, sends are accepted.
    pub fn script(&self, replies: impl IntoIterator<Item = Reply>) {
        self.inner.lock().expect("lock").script.extend(replies);
    }

    pub fn sends(&self) -> Vec<Send> {
        self.inner.lock().expect("lock").sends.clone()
    }

    /// Queues replies for the next media uploads; once empty, uploads are accepted.
    pub fn script_uploads(&self, replies: impl IntoIterator<Item = Reply>) {
        self.inner.lock().expect("lock").upload_script.extend(replies);
    }

    pub fn uploads(&self) -> Vec<Upload> {
        self.inner.lock().expect("lock").uploads.clone()
    }

    /// Serves a customer's media under `id`; `announced_size` overrides the size `GET /{id}`
    /// tells (a file that says it is 20 MB).
    pub fn add_media(&self, id: &str, mime_type: &str, bytes: &[u8], announced_size: Option<u64>) {
        let media = StoredMedia { mime_type: mime_type.to_owned(), bytes: bytes.to_vec(), announced_size };
        self.inner.lock().expect("lock").media.insert(id.to_owned(), media);
    }

    /// The next `times` media lookups fail with `status` and Meta's error envelope
    /// (code 2, "Service temporarily unavailable").
    pub fn fail_media_gets(&self, times: usize, status: u16) {
        self.inner.lock().expect("lock").media_outage = Some((times, status));
    }

    /// Media ids asked for with `GET /{media-id}`, in order.
    pub fn media_gets(&self) -> Vec<String> {
        self.inner.lock().expect("lock").media_gets.clone()
    }

    /// Media ids downloaded, in order.
    pub fn downloads(&self) -> Vec<String> {
        self.inner.lock().expect("lock").downloads.clone()
    }

    /// Answers every send of this `interactive.type` (say `order_details` on a number not
    /// enabled for payments) with `reply`, whatever the script says; other sends go on as
    /// scripted.
    pub fn answer_interactive(&self, interactive_type: &str, reply: Reply) {
        self.inner.lock().expect("lock").by_interactive_type.insert(interactive_type.to_owned(), reply);
    }
}

async fn messages(
    State(inner): State<Arc<Mutex<Inner>>>,
    Path(phone_number_id): Path<String>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    let (reply, id) = {
        let mut inner = inner.lock().expect("lock");
        inner.sends.push(Send {
            phone_number_id,
            authorization: headers.get("authorization").and_then(|v| v.to_str().ok()).map(str::to_owned),
            body: body.clone(),
        });
        inner.next_id += 1;
        let by_type = body["interactive"]["type"].as_str().and_then(|t| inner.by_interactive_type.get(t)).cloned();
        let reply = match by_type {
            Some(reply) => reply,
            None => inner.script.pop_front().unwrap_or(Reply::Accept),
        };
        (reply, inner.next_id)
    };
    if let Some(problem) = invalid_location(&body) {
        return refuse_with(400, 100, &problem);
    }
    answer(reply, || {
        Json(json!({
            "messaging_product": "whatsapp",
            "contacts": [{ "input": body["to"], "wa_id": body["to"].as_str().map(|t| t.trim_start_matches('+')) }],
            "messages": [{ "id": format!("wamid.FAKE{id:06}") }],
        }))
        .into_response()
    })
    .await
}

async fn media(
    State(inner): State<Arc<Mutex<Inner>>>,
    Path(phone_number_id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let content_type = headers.get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default();
    let parts = match parse_multipart(content_type, &body) {
        Ok(parts) => parts,
        Err(e) => return refuse_with(400, 100, &format!("unreadable multipart form: {e}")),
    };
    let field =
        |name: &str| parts.iter().find(|p| p.name == name).map(|p| String::from_utf8_lossy(&p.body).into_owned());
    let file = parts.iter().find(|p| p.name == "file");
    let upload = Upload {
        phone_number_id,
        authorization: headers.get("authorization").and_then(|v| v.to_str().ok()).map(str::to_owned),
        messaging_product: field("messaging_product"),
        media_type: field("type"),
        file_name: file.and_then(|f| f.file_name.clone()),
        file_content_type: file.and_then(|f| f.content_type.clone()),
        file: file.map(|f| f.body.clone()).unwrap_or_default(),
    };
    let (reply, id) = {
        let mut inner = inner.lock().expect("lock");
        inner.uploads.push(upload);
        inner.next_media_id += 1;
        (inner.upload_script.pop_front().unwrap_or(Reply::Accept), inner.next_media_id)
    };
    answer(reply, || Json(json!({ "id": format!("media.FAKE{id:06}") })).into_response()).await
}

/// A location message needs its latitude and longitude, decimal degrees on the map (Meta's
/// "Location messages" page); `(#100) Invalid parameter` otherwise.
fn invalid_location(body: &Value) -> Option<String> {
    if body["type"] != "location" {
        return None;
    }
    let degrees = |field: &str, max: f64| {
        let value = &body["location"][field];
        let parsed = value.as_str().and_then(|v| v.parse::<f64>().ok()).or_else(|| value.as_f64());
        match parsed {
            Some(d) if d.is_finite() && d.abs() <= max => None,
            _ => Some(format!("location.{field} is required: decimal degrees")),
        }
    };
    degrees("latitude", 90.0).or_else(|| degrees("longitude", 180.0))
}

/// Media is served only to the business's token (the tests' server token).
fn token_ok(headers: &HeaderMap) -> bool {
    let expected = format!("Bearer {}", crate::support::common::ACCESS_TOKEN);
    headers.get("authorization").and_then(|v| v.to_str().ok()) == Some(expected.as_str())
}

/// `GET /{media-id}`: where the file is, and what it is.
async fn media_info(
    State(inner): State<Arc<Mutex<Inner>>>,
    Path(media_id): Path<String>,
    headers: HeaderMap,
) -> Response {
    if !token_ok(&headers) {
        return refuse_with(401, 190, "Error validating access token");
    }
    let (media, outage) = {
        let mut inner = inner.lock().expect("lock");
        inner.media_gets.push(media_id.clone());
        let outage = match &mut inner.media_outage {
            Some((left, status)) if *left > 0 => {
                *left -= 1;
                Some(*status)
            }
            _ => None,
        };
        (inner.media.get(&media_id).cloned(), outage)
    };
    if let Some(status) = outage {
        return refuse_with(status, 2, "Service temporarily unavailable");
    }
    let Some(media) = media else {
        return refuse_with(400, 100, &format!("Object with ID '{media_id}' does not exist"));
    };
    let host = headers.get("host").and_then(|v| v.to_str().ok()).unwrap_or("127.0.0.1");
    Json(json!({
        "messaging_product": "whatsapp",
        "url": format!("http://{host}/whatsapp_business/attachments/{media_id}"),
        "mime_type": media.mime_type,
        "sha256": "c2hhMjU2LW9mLXRoZS1maWxl",
        "file_size": media.announced_size.unwrap_or(media.bytes.len() as u64).to_string(),
        "id": media_id,
    }))
    .into_response()
}

/// The media URL: the bytes, with the Bearer token.
async fn download(
    State(inner): State<Arc<Mutex<Inner>>>,
    Path(media_id): Path<String>,
    headers: HeaderMap,
) -> Response {
    if !token_ok(&headers) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    let media = {
        let mut inner = inner.lock().expect("lock");
        inner.downloads.push(media_id.clone());
        inner.media.get(&media_id).cloned()
    };
    match media {
        Some(media) => ([("content-type", media.mime_type)], media.bytes).into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

/// Meta's error envelope with `code`.
fn refuse_with(status: u16, code: i64, details: &str) -> Response {
    (
        StatusCode::from_u16(status).expect("status"),
        Json(json!({ "error": {
            "message": format!("(#{code}) simulated"),
            "type": "OAuthException",
            "code": code,
            "error_data": { "messaging_product": "whatsapp", "details": details },
            "fbtrace_id": "AFakeTrace",
        }})),
    )
        .into_response()
}

/// `reply` as sends and uploads give it; `accept` is the endpoint's own success.
async fn answer(reply: Reply, accept: impl FnOnce() -> Response) -> Response {
    match reply {
        Reply::Accept => accept(),
        Reply::Error(status, code) => refuse_with(status, code, "simulated by the fake"),
        Reply::Status(status) => StatusCode::from_u16(status).expect("status").into_response(),
        Reply::Hang => {
            tokio::time::sleep(Duration::from_secs(30)).await;
            StatusCode::GATEWAY_TIMEOUT.into_response()
        }
    }
}

pub(crate) struct FormPart {
    pub name: String,
    pub file_name: Option<String>,
    pub content_type: Option<String>,
    pub body: Vec<u8>,
}

/// Just enough of RFC 7578 for the client's form: `--boundary` delimited parts, each with
/// headers, a blank line and a body.
pub(crate) fn parse_multipart(content_type: &str, body: &[u8]) -> Result<Vec<FormPart>, String> {
    if !content_type.starts_with("multipart/form-data") {
        return Err(format!("content type {content_type:?}"));
    }
    let boundary = content_type
        .split(';')
        .find_map(|p| p.trim().strip_prefix("boundary="))
        .map(|b| b.trim_matches('"'))
        .ok_or("no boundary")?;
    let delimiter = format!("--{boundary}").into_bytes();
    let next_delimiter = [b"\r\n".as_slice(), &delimiter].concat();
    let find = |haystack: &[u8], needle: &[u8]| haystack.windows(needle.len()).position(|w| w == needle);
    let start = find(body, &delimiter).ok_or("no opening boundary")?;
    let mut rest = &body[start + delimiter.len()..];
    let mut parts = Vec::new();
    while !rest.starts_with(b"--") {
        rest = rest.strip_prefix(b"\r\n").ok_or("a boundary not followed by CRLF")?;
        let end = find(rest, &next_delimiter).ok_or("an unterminated part")?;
        let (part, after) = rest.split_at(end);
        rest = &after[next_delimiter.len()..];
        let split = find(part, b"\r\n\r\n").ok_or("a part without headers")?;
        let head = std::str::from_utf8(&part[..split]).map_err(|e| e.to_string())?;
        let mut form_part =
            FormPart { name: String::new(), file_name: None, content_type: None, body: part[split + 4..].to_vec() };
        for line in head.split("\r\n") {
            let (header, value) = line.split_once(':').ok_or("a malformed header")?;
            match header.trim().to_ascii_lowercase().as_str() {
                "content-disposition" => {
                    for attribute in value.split(';').map(str::trim) {
                        let unquote = |v: &str| v.trim_matches('"').to_owned();
                        if let Some(v) = attribute.strip_prefix("name=") {
                            form_part.name = unquote(v);
                        } else if let Some(v) = attribute.strip_prefix("filename=") {
                            form_part.file_name = Some(unquote(v));
                        }
                    }
                }
                "content-type" => form_part.content_type = Some(value.trim().to_owned()),
                _ => {}
            }
        }
        parts.push(form_part);
    }
    Ok(parts)
}
