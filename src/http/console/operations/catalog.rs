//! `/admin/{slug}/catalog`: services, professionals (their services and weekly hours) and the
//! booking settings, read-only: the tenant file is the source of truth (`balcao tenant apply`).

use askama::Template;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum_csrf::CsrfToken;
use chrono::Weekday;

use crate::http::AppState;
use crate::http::console::auth::{Admin, csrf_field};
use crate::http::console::error::{ConsoleError, render};
use crate::http::console::page::{Nav, Section};
use crate::store::CatalogStore;

pub struct ServiceRow {
    pub name: String,
    pub duration: i64,
    pub buffer: i64,
    pub price: String,
    pub deposit: String,
}

pub struct ProfessionalRow {
    pub name: String,
    pub services: String,
    pub hours: Vec<(&'static str, String)>,
    pub time_off: Vec<String>,
}

#[derive(Template)]
#[template(path = "console/catalog.html")]
struct CatalogPage {
    nav: Nav,
    services: Vec<ServiceRow>,
    professionals: Vec<ProfessionalRow>,
    timezone: String,
    min_notice: u32,
    horizon: u32,
    step: u32,
    deposit_minutes: u32,
}

const DAYS: [(Weekday, &str); 7] = [
    (Weekday::Mon, "segunda"),
    (Weekday::Tue, "terça"),
    (Weekday::Wed, "quarta"),
    (Weekday::Thu, "quinta"),
    (Weekday::Fri, "sexta"),
    (Weekday::Sat, "sábado"),
    (Weekday::Sun, "domingo"),
];

pub async fn page(
    State(state): State<AppState>,
    admin: Admin,
    token: CsrfToken,
    Path(slug): Path<String>,
) -> Result<Response, ConsoleError> {
    let tenant = admin.tenant(&state, &slug).await?;
    let nav = Nav::new(&admin, &tenant, csrf_field(&token)?, Section::Catalog);
    let (services, professionals) = state.store.catalog(tenant.id).await?;
    let service_rows = services
        .iter()
        .map(|s| ServiceRow {
            name: s.name.clone(),
            duration: s.duration_minutes,
            buffer: s.buffer_minutes,
            price: s.price.to_string(),
            deposit: if s.deposit.0 > 0 { s.deposit.to_string() } else { "—".to_owned() },
        })
        .collect();
    let professional_rows = professionals
        .iter()
        .map(|p| ProfessionalRow {
            name: p.name.clone(),
            services: services
                .iter()
                .filter(|s| p.service_ids.contains(&s.id))
                .map(|s| s.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            hours: DAYS
                .iter()
                .map(|(day, label)| {
                    let ranges = p.hours.on(*day);
                    let text = if ranges.is_empty() {
                        "fechado".to_owned()
                    } else {
                        ranges
                            .iter()
                            .map(|(a, b)| format!("{}–{}", a.format("%H:%M"), b.format("%H:%M")))
                            .collect::<Vec<_>>()
                            .join(", ")
                    };
                    (*label, text)
                })
                .collect(),
            time_off: p
                .time_off
                .iter()
                .map(|(a, b)| format!("{} a {}", a.format("%d/%m/%Y %H:%M"), b.format("%d/%m/%Y %H:%M")))
                .collect(),
        })
        .collect();
    let b = &tenant.booking;
    let page = CatalogPage {
        services: service_rows,
        professionals: professional_rows,
        timezone: tenant.timezone.name().to_owned(),
        min_notice: b.min_notice_minutes,
        horizon: b.horizon_days,
        step: b.slot_step_minutes,
        deposit_minutes: b.deposit_minutes,
        nav,
    };
    Ok((token, render(&page)?).into_response())
}
