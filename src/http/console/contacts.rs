//! A customer's data page (LGPD): who they are, how much is stored, the JSON export and the
//! erasure. See `crate::privacy` for what erasing removes and keeps.
//!
//! Invariants: every query names the admin's tenant; another tenant's contact is "not found";
//! the erasure needs the CSRF token and an explicit `confirm=sim`, and repeating it changes
//! nothing.

use askama::Template;
use axum::Router;
use axum::extract::{Form, Path, State};
use axum::http::header;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum_csrf::CsrfToken;
use chrono::Utc;
use serde::Deserialize;

use super::auth::{Admin, csrf_field};
use super::error::{ConsoleError, render};
use super::page::{Nav, Section, local_time};
use crate::domain::ContactId;
use crate::http::AppState;
use crate::store::{ContactCounts, ContactRecord, PrivacyStore};
use crate::tenant::Tenant;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/admin/{slug}/contacts/{id}", get(page))
        .route("/admin/{slug}/contacts/{id}/export", get(export))
        .route("/admin/{slug}/contacts/{id}/erase", post(erase))
}

#[derive(Template)]
#[template(path = "console/contact.html")]
struct ContactPage {
    nav: Nav,
    id: i64,
    name: String,
    username: String,
    number: String,
    created: String,
    opted_out: Option<String>,
    erased: Option<String>,
    counts: ContactCounts,
}

/// The contact, or 404 when the tenant has none with this id.
async fn contact_of(state: &AppState, tenant: &Tenant, id: i64) -> Result<ContactRecord, ConsoleError> {
    state.store.contact_record(tenant.id, ContactId(id)).await?.ok_or(ConsoleError::NotFound)
}

async fn page(
    State(state): State<AppState>,
    admin: Admin,
    token: CsrfToken,
    Path((slug, id)): Path<(String, i64)>,
) -> Result<Response, ConsoleError> {
    let tenant = admin.tenant(&state, &slug).await?;
    let contact = contact_of(&state, &tenant, id).await?;
    let counts = state.store.contact_counts(tenant.id, ContactId(id)).await?;
    let nav = Nav::new(&admin, &tenant, csrf_field(&token)?, Section::Conversations);
    let number = match (&contact.wa_id, &contact.user_id) {
        (Some(wa), _) => format!("+{wa}"),
        (None, Some(user)) => user.clone(),
        (None, None) => String::new(),
    };
    let page = ContactPage {
        nav,
        id,
        name: contact.profile_name.clone().unwrap_or_default(),
        username: contact.username.clone().unwrap_or_default(),
        number,
        created: local_time(tenant.timezone, contact.created_at),
        opted_out: contact.opted_out_at.map(|t| local_time(tenant.timezone, t)),
        erased: contact.erased_at.map(|t| local_time(tenant.timezone, t)),
        counts,
    };
    Ok((token, render(&page)?).into_response())
}

/// A JSON download of everything stored about the contact.
async fn export(
    State(state): State<AppState>,
    admin: Admin,
    Path((slug, id)): Path<(String, i64)>,
) -> Result<Response, ConsoleError> {
    let tenant = admin.tenant(&state, &slug).await?;
    let data = state.store.export_contact(tenant.id, ContactId(id)).await?.ok_or(ConsoleError::NotFound)?;
    let body = serde_json::to_vec_pretty(&data).map_err(|e| ConsoleError::Internal(e.into()))?;
    let disposition = format!("attachment; filename=\"contato-{id}.json\"");
    Ok((
        [
            (header::CONTENT_TYPE, "application/json; charset=utf-8".to_owned()),
            (header::CONTENT_DISPOSITION, disposition),
            (header::CACHE_CONTROL, "no-store".to_owned()),
        ],
        body,
    )
        .into_response())
}

#[derive(Deserialize)]
struct EraseForm {
    #[serde(default)]
    confirm: String,
}

async fn erase(
    State(state): State<AppState>,
    admin: Admin,
    Path((slug, id)): Path<(String, i64)>,
    Form(form): Form<EraseForm>,
) -> Result<Response, ConsoleError> {
    let tenant = admin.tenant(&state, &slug).await?;
    contact_of(&state, &tenant, id).await?;
    if form.confirm != "sim" {
        return Err(ConsoleError::BadRequest("Marque a confirmação para apagar os dados.".into()));
    }
    let now = state.store.db_time(Utc::now());
    crate::privacy::erase(&state.store, &state.replier, &state.privacy_key, &tenant, ContactId(id), now).await?;
    Ok(Redirect::to(&format!("/admin/{slug}/contacts/{id}")).into_response())
}
