//! `/admin/{slug}/agenda`: the calendar (a day, one column per professional; or a week, one
//! grid per professional with a column per day) and `/admin/{slug}/appointments/{id}`: one
//! appointment's detail and history, cancelled or moved from there.
//!
//! Invariants: only the visible range is read (an indexed range scan on `appointments
//! (tenant_id, starts_at)`), so the page costs the same with ten or ten thousand appointments;
//! times are shown in the tenant's zone; the grid is computed here and only placed by CSS.

mod changes;
mod detail;
pub(crate) mod grid;

/// Shared with the operations pages (the actions list).
pub(crate) mod detail_support {
    pub(crate) use super::detail::{ActionRow, action_row};
}
/// Who a console change is recorded as, and its ledger lease; shared with the charges page.
pub(crate) use changes::{BY_CONSOLE, LEDGER_LEASE};

use askama::Template;
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum_csrf::CsrfToken;
use chrono::{DateTime, Datelike, Days, NaiveDate, NaiveTime, TimeZone, Utc, Weekday};
use chrono_tz::Tz;
use serde::Deserialize;

use self::grid::{Column, ColumnKey, Grid};
use super::auth::{Admin, csrf_field};
use super::error::{ConsoleError, render};
use super::page::{Nav, Section};
use crate::http::AppState;
use crate::store::{CatalogStore, ConsoleAgendaStore};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/admin/{slug}/agenda", get(page))
        .route("/admin/{slug}/appointments/{id}", get(detail::page))
        .route("/admin/{slug}/appointments/{id}/cancel", post(changes::cancel))
        .route("/admin/{slug}/appointments/{id}/move", post(changes::move_to))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum View {
    Day,
    Week,
}

impl View {
    fn as_str(self) -> &'static str {
        match self {
            Self::Day => "day",
            Self::Week => "week",
        }
    }
}

#[derive(Deserialize)]
pub struct AgendaQuery {
    date: Option<String>,
    view: Option<String>,
}

#[derive(Template)]
#[template(path = "console/agenda.html")]
struct AgendaPage {
    nav: Nav,
    view: &'static str,
    heading: String,
    prev: String,
    next: String,
    today: String,
    day_link: String,
    week_link: String,
    date: String,
    grids: Vec<Grid>,
    empty: bool,
}

const WEEKDAYS: [&str; 7] =
    ["segunda-feira", "terça-feira", "quarta-feira", "quinta-feira", "sexta-feira", "sábado", "domingo"];
const WEEKDAYS_SHORT: [&str; 7] = ["seg", "ter", "qua", "qui", "sex", "sáb", "dom"];
const MONTHS: [&str; 12] = [
    "janeiro",
    "fevereiro",
    "março",
    "abril",
    "maio",
    "junho",
    "julho",
    "agosto",
    "setembro",
    "outubro",
    "novembro",
    "dezembro",
];

/// `terça-feira, 10 de março de 2026`.
pub(crate) fn long_date(d: NaiveDate) -> String {
    format!(
        "{}, {} de {} de {}",
        WEEKDAYS[d.weekday().num_days_from_monday() as usize],
        d.day(),
        MONTHS[d.month0() as usize],
        d.year()
    )
}

fn short_date(d: NaiveDate) -> String {
    format!("{} {}", WEEKDAYS_SHORT[d.weekday().num_days_from_monday() as usize], d.format("%d/%m"))
}

/// The instant local midnight of `day` is in `tz` (the first instant of the day when a
/// daylight-saving change skips midnight).
pub(crate) fn day_start(tz: Tz, day: NaiveDate) -> DateTime<Utc> {
    (0..=2)
        .find_map(|h| tz.from_local_datetime(&day.and_time(NaiveTime::MIN + chrono::TimeDelta::hours(h))).earliest())
        .map_or_else(|| day.and_time(NaiveTime::MIN).and_utc(), |t| t.with_timezone(&Utc))
}

pub(crate) fn today(tz: Tz) -> NaiveDate {
    Utc::now().with_timezone(&tz).date_naive()
}

async fn page(
    State(state): State<AppState>,
    admin: Admin,
    token: CsrfToken,
    Path(slug): Path<String>,
    Query(query): Query<AgendaQuery>,
) -> Result<Response, ConsoleError> {
    let tenant = admin.tenant(&state, &slug).await?;
    let nav = Nav::new(&admin, &tenant, csrf_field(&token)?, Section::Agenda);
    let tz = tenant.timezone;
    let view = match query.view.as_deref() {
        None | Some("" | "day") => View::Day,
        Some("week") => View::Week,
        Some(_) => return Err(ConsoleError::BadRequest("Visão inválida: use dia ou semana.".into())),
    };
    let date = match query.date.as_deref() {
        None | Some("") => today(tz),
        Some(raw) => NaiveDate::parse_from_str(raw, "%Y-%m-%d")
            .map_err(|_| ConsoleError::BadRequest("Data inválida: use AAAA-MM-DD.".into()))?,
    };
    let (first, days) = match view {
        View::Day => (date, 1),
        View::Week => (date.week(Weekday::Mon).first_day(), 7),
    };
    let last =
        first.checked_add_days(Days::new(days)).ok_or_else(|| ConsoleError::BadRequest("Data inválida.".into()))?;
    let entries = state.store.agenda_entries(tenant.id, day_start(tz, first), day_start(tz, last)).await?;
    let (_, professionals) = state.store.catalog(tenant.id).await?;
    let step = tenant.booking.slot_step_minutes;
    let column = |p: &crate::booking::Professional, day: NaiveDate, label: String, sub: String| Column {
        key: ColumnKey { professional_id: p.id, date: day },
        label,
        sub,
        open: grid::open_minutes(p.hours.on(day.weekday())),
    };
    // Appointments of a professional no longer in the catalog still get a column.
    let mut gone: Vec<i64> =
        entries.iter().map(|e| e.professional_id).filter(|id| !professionals.iter().any(|p| p.id == *id)).collect();
    gone.sort_unstable();
    gone.dedup();
    let removed = |id: i64, day: NaiveDate, sub: String| Column {
        key: ColumnKey { professional_id: id, date: day },
        label: "Profissional removido".to_owned(),
        sub,
        open: Vec::new(),
    };
    let (heading, grids) = match view {
        View::Day => {
            let mut columns: Vec<Column> =
                professionals.iter().map(|p| column(p, date, p.name.clone(), String::new())).collect();
            columns.extend(gone.iter().map(|id| removed(*id, date, String::new())));
            (long_date(date), vec![grid::build(String::new(), tz, step, columns, &entries)])
        }
        View::Week => {
            let days: Vec<NaiveDate> = first.iter_days().take(7).collect();
            let mut grids: Vec<Grid> = professionals
                .iter()
                .map(|p| {
                    let columns = days.iter().map(|d| column(p, *d, short_date(*d), String::new())).collect();
                    grid::build(p.name.clone(), tz, step, columns, &entries)
                })
                .collect();
            grids.extend(gone.iter().map(|id| {
                let columns = days.iter().map(|d| removed(*id, *d, short_date(*d))).collect();
                grid::build("Profissional removido".to_owned(), tz, step, columns, &entries)
            }));
            let end = first + Days::new(6);
            (format!("Semana de {} a {}", first.format("%d/%m"), end.format("%d/%m/%Y")), grids)
        }
    };
    let link = |d: NaiveDate, v: View| {
        format!("/admin/{}/agenda?date={}&view={}", tenant.slug, d.format("%Y-%m-%d"), v.as_str())
    };
    let step_days = Days::new(days);
    let page = AgendaPage {
        view: view.as_str(),
        heading,
        prev: date.checked_sub_days(step_days).map(|d| link(d, view)).unwrap_or_default(),
        next: date.checked_add_days(step_days).map(|d| link(d, view)).unwrap_or_default(),
        today: link(today(tz), view),
        day_link: link(date, View::Day),
        week_link: link(date, View::Week),
        date: date.format("%Y-%m-%d").to_string(),
        empty: entries.is_empty(),
        grids,
        nav,
    };
    Ok((token, render(&page)?).into_response())
}
