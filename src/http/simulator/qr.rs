//! `GET /simulator/api/tenants/{slug}/qr?code=…`: the QR image of a Pix code, as the customer
//! would get it. The outbox stores only the code (the PNG is rendered at send time), so the
//! page asks for it here; the code must be a valid BR Code (CRC and fields) and is rendered by
//! the same renderer the sender uses.

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::{SimError, access};
use crate::http::console::ConsoleError;
use crate::http::console::auth::Admin;
use crate::http::{ApiError, AppState};

#[derive(Deserialize)]
pub struct QrQuery {
    code: String,
}

pub async fn qr(
    State(state): State<AppState>,
    headers: HeaderMap,
    admin: Result<Admin, ConsoleError>,
    Path(slug): Path<String>,
    Query(q): Query<QrQuery>,
) -> Result<Response, SimError> {
    access(&state, &headers, admin, &slug).await?;
    crate::pix::decode(&q.code).map_err(|e| ApiError::BadRequest(format!("not a Pix code: {e}")))?;
    let png = crate::pix::qr::png(&q.code).map_err(|e| ApiError::BadRequest(e.to_string()))?;
    Ok(([(header::CONTENT_TYPE, "image/png"), (header::CACHE_CONTROL, "private, max-age=3600")], png).into_response())
}
