//! What a console request can end in, as the browser should see it: a login redirect, a 403
//! for a missing CSRF token, a 404 for anything outside the admin's tenants (never a 403, which
//! would confirm the id exists), a 429 when logins are throttled; and a template rendered to HTML,
//! whose failure is one of them.

use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Redirect, Response};

#[derive(Debug, thiserror::Error)]
pub enum ConsoleError {
    #[error("login required")]
    LoginRequired,
    #[error("invalid or missing CSRF token")]
    Csrf,
    #[error("not found")]
    NotFound,
    #[error("too many attempts")]
    Throttled,
    #[error("bad request: {0}")]
    BadRequest(String),
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

impl From<crate::store::StoreError> for ConsoleError {
    fn from(e: crate::store::StoreError) -> Self {
        Self::Internal(e.into())
    }
}

impl From<askama::Error> for ConsoleError {
    fn from(e: askama::Error) -> Self {
        Self::Internal(e.into())
    }
}

impl IntoResponse for ConsoleError {
    fn into_response(self) -> Response {
        let (status, text) = match &self {
            Self::LoginRequired => return Redirect::to("/admin/login").into_response(),
            Self::Csrf => (StatusCode::FORBIDDEN, "Formulário expirado ou inválido. Recarregue a página.".to_owned()),
            Self::NotFound => (StatusCode::NOT_FOUND, "Não encontrado.".to_owned()),
            Self::Throttled => {
                (StatusCode::TOO_MANY_REQUESTS, "Muitas tentativas. Tente de novo mais tarde.".to_owned())
            }
            Self::BadRequest(reason) => (StatusCode::BAD_REQUEST, reason.clone()),
            Self::Internal(e) => {
                tracing::error!(error = format!("{e:#}"), "console request failed");
                (StatusCode::INTERNAL_SERVER_ERROR, "Erro interno.".to_owned())
            }
        };
        // The text is ours, but escape it anyway: a BadRequest may quote input.
        let body = format!("<!doctype html><meta charset=utf-8><title>Balcão</title><p>{}</p>", escape(&text));
        (status, Html(body)).into_response()
    }
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

pub fn render(page: &impl askama::Template) -> Result<Html<String>, ConsoleError> {
    Ok(Html(page.render()?))
}
