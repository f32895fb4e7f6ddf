//! `GET /simulator`: the WhatsApp-like page, and its script and stylesheet (compiled into the
//! binary). The page is a frame: messages are drawn by `assets/simulator.js` from the event
//! stream, always as text (`textContent`), never as HTML.

use askama::Template;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{Html, IntoResponse, Redirect, Response};
use serde::Deserialize;

use super::{SimError, Viewer};
use crate::http::console::ConsoleError;
use crate::http::console::auth::Admin;
use crate::http::{ApiError, AppState};
use crate::store::TenantStore;

/// A tenant the page offers, with its staff numbers (to act as the business).
struct PageTenant {
    slug: String,
    name: String,
    /// Comma-separated `+55…` numbers.
    staff: String,
}

#[derive(Template)]
#[template(path = "simulator/index.html")]
struct SimulatorPage {
    tenants: Vec<PageTenant>,
    selected: String,
    /// The console admin looking, if any (a link back to the console).
    admin: Option<String>,
}

#[derive(Deserialize)]
pub struct PageQuery {
    tenant: Option<String>,
}

pub async fn page(
    State(state): State<AppState>,
    headers: HeaderMap,
    admin: Result<Admin, ConsoleError>,
    Query(q): Query<PageQuery>,
) -> Result<Response, SimError> {
    let viewer = match Viewer::of(&state, &headers, admin) {
        Ok(viewer) => viewer,
        Err(_) => return Ok(Redirect::to("/admin/login").into_response()),
    };
    let mut tenants = Vec::new();
    for t in viewer.tenants(&state).await? {
        let staff = state.store.staff(t.tenant_id()).await?;
        let staff: Vec<&str> = staff.iter().map(|p| p.as_str()).collect();
        tenants.push(PageTenant { slug: t.slug, name: t.name, staff: staff.join(",") });
    }
    let selected = q
        .tenant
        .filter(|s| tenants.iter().any(|t| &t.slug == s))
        .or_else(|| tenants.first().map(|t| t.slug.clone()))
        .unwrap_or_default();
    let admin = match &viewer {
        Viewer::Admin(a) => Some(a.email.clone()),
        Viewer::Everyone => None,
    };
    let html = SimulatorPage { tenants, selected, admin }.render().map_err(|e| ApiError::Internal(e.into()))?;
    Ok(Html(html).into_response())
}

/// The page's script and stylesheet.
pub async fn asset(Path(file): Path<String>) -> Response {
    match file.as_str() {
        "simulator.js" => {
            ([(header::CONTENT_TYPE, "text/javascript; charset=utf-8")], include_str!("../../../assets/simulator.js"))
                .into_response()
        }
        "simulator.css" => {
            ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], include_str!("../../../assets/simulator.css"))
                .into_response()
        }
        _ => StatusCode::NOT_FOUND.into_response(),
    }
}
