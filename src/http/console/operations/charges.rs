//! `/admin/{slug}/charges`: every charge, newest first, and the paid total of each of the last
//! 30 local days as a bar chart (SVG drawn by the template from bars computed here).

use askama::Template;
use axum::Form;
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Redirect, Response};
use axum_csrf::CsrfToken;
use chrono::{DateTime, Days, NaiveDate, Utc};
use chrono_tz::Tz;
use serde::Deserialize;

use super::LIST_LIMIT;
use crate::actions::offer_refund;
use crate::domain::Cents;
use crate::http::AppState;
use crate::http::console::agenda::{BY_CONSOLE, LEDGER_LEASE};
use crate::http::console::agenda::{day_start, today};
use crate::http::console::auth::{Admin, csrf_field};
use crate::http::console::error::{ConsoleError, render};
use crate::http::console::page::{Nav, Section, local_time as at};
use crate::ledger::Outcome;
use crate::money::charges::{Withdrawals, refundable};
use crate::store::{ChargeStore, ConsoleOpsStore};

/// Days in the chart, today included.
const CHART_DAYS: u64 = 30;
const BAR_WIDTH: i64 = 18;
const BAR_GAP: i64 = 4;
const CHART_HEIGHT: i64 = 120;

pub struct ChargeRow {
    pub id: i64,
    pub status: String,
    pub status_label: &'static str,
    pub amount: String,
    pub customer: String,
    pub phone: String,
    pub description: String,
    pub txid: String,
    pub gateway: String,
    pub created: String,
    pub paid: String,
    pub appointment_href: Option<String>,
    /// Given back so far (empty when nothing).
    pub refunded: String,
    /// What may still be given back, as the refund form's default (empty when nothing).
    pub refundable: String,
}

/// One day's bar: geometry in SVG units, the day and its total.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bar {
    pub x: i64,
    pub y: i64,
    pub height: i64,
    pub date: String,
    pub label: String,
    pub cents: i64,
    pub amount: String,
}

pub struct Chart {
    pub bars: Vec<Bar>,
    pub width: i64,
    pub height: i64,
    pub total_cents: i64,
    pub total: String,
}

#[derive(Template)]
#[template(path = "console/charges.html")]
struct ChargesPage {
    nav: Nav,
    charges: Vec<ChargeRow>,
    chart: Chart,
    notice: Option<&'static str>,
}

#[derive(Deserialize)]
pub struct ChargesQuery {
    ok: Option<String>,
}

fn status_label(status: &str) -> &'static str {
    match status {
        "pending" => "aguardando",
        "paid" => "paga",
        "expired" => "expirada",
        "cancelled" => "cancelada",
        "refund_due" => "a devolver",
        "partially_refunded" => "devolvida em parte",
        "refunded" => "devolvida",
        _ => "outra",
    }
}

/// Sums `paid` (instant, cents) into the `days` local days ending with `last`, and lays the
/// bars out (the tallest fills the chart; a day with payments is never drawn empty).
pub fn chart(tz: Tz, last: NaiveDate, days: u64, paid: &[(DateTime<Utc>, i64)]) -> Chart {
    let first = last.checked_sub_days(Days::new(days.saturating_sub(1))).unwrap_or(last);
    let dates: Vec<NaiveDate> = first.iter_days().take(days as usize).collect();
    let mut totals = vec![0_i64; dates.len()];
    for (when, cents) in paid {
        let day = when.with_timezone(&tz).date_naive();
        if let Some(i) = dates.iter().position(|d| *d == day) {
            totals[i] += cents;
        }
    }
    let max = totals.iter().copied().max().unwrap_or(0).max(1);
    let bars = dates
        .iter()
        .zip(&totals)
        .enumerate()
        .map(|(i, (d, cents))| {
            let height = if *cents > 0 { (cents * CHART_HEIGHT / max).max(2) } else { 0 };
            Bar {
                x: i as i64 * (BAR_WIDTH + BAR_GAP),
                y: CHART_HEIGHT - height,
                height,
                date: d.format("%Y-%m-%d").to_string(),
                label: d.format("%d/%m").to_string(),
                cents: *cents,
                amount: Cents(*cents).to_string(),
            }
        })
        .collect();
    let total_cents = totals.iter().sum();
    Chart {
        bars,
        width: dates.len() as i64 * (BAR_WIDTH + BAR_GAP),
        height: CHART_HEIGHT,
        total_cents,
        total: Cents(total_cents).to_string(),
    }
}

pub async fn page(
    State(state): State<AppState>,
    admin: Admin,
    token: CsrfToken,
    Path(slug): Path<String>,
    Query(query): Query<ChargesQuery>,
) -> Result<Response, ConsoleError> {
    let tenant = admin.tenant(&state, &slug).await?;
    let nav = Nav::new(&admin, &tenant, csrf_field(&token)?, Section::Charges);
    let tz = tenant.timezone;
    let last = today(tz);
    let first = last.checked_sub_days(Days::new(CHART_DAYS - 1)).unwrap_or(last);
    let end = last.checked_add_days(Days::new(1)).unwrap_or(last);
    let paid = state.store.paid_amounts(tenant.id, day_start(tz, first), day_start(tz, end)).await?;
    let charges = state
        .store
        .charge_entries(tenant.id, LIST_LIMIT)
        .await?
        .into_iter()
        .map(|c| ChargeRow {
            refunded: if c.refunded_cents > 0 { Cents(c.refunded_cents).to_string() } else { String::new() },
            refundable: match refundable(&c.status, c.amount_cents, c.refund_reserved_cents) {
                Cents(0) => String::new(),
                left => left.to_decimal(),
            },
            id: c.id,
            status_label: status_label(&c.status),
            status: c.status,
            amount: Cents(c.amount_cents).to_string(),
            customer: c.customer.unwrap_or_default(),
            phone: c.customer_phone,
            description: c.description,
            txid: c.txid,
            gateway: c.gateway,
            created: at(tz, c.created_at),
            paid: c.paid_at.map(|t| at(tz, t)).unwrap_or_default(),
            appointment_href: c.appointment_id.map(|id| nav.href(&format!("appointments/{id}"))),
        })
        .collect();
    let notice = match query.ok.as_deref() {
        Some("cancelled") => Some("Cobrança cancelada: ela não pode mais ser paga."),
        Some("paid") => Some("Essa cobrança já tinha sido paga: nada foi cancelado, e ela aparece como paga."),
        Some("not_pending") => Some("Essa cobrança já não estava aguardando pagamento: nada a cancelar."),
        Some("in_progress") => Some("Essa cobrança está sendo cancelada; confira em instantes."),
        Some("failed") => Some("O provedor de Pix não cancelou a cobrança agora. Tente de novo em instantes."),
        Some("refund_offered") => Some(
            "Devolução preparada: os botões Confirmar/Cancelar foram enviados no WhatsApp da equipe; o dinheiro só \
             sai quando alguém da equipe tocar em Confirmar.",
        ),
        Some("refund_amount") => {
            Some("Valor inválido: informe um valor maior que zero e até o que ainda pode ser devolvido.")
        }
        Some("not_refundable") => Some("Essa cobrança não tem valor pago a devolver."),
        Some("no_staff") => {
            Some("Não há número da equipe configurado ([whatsapp] staff) para receber os botões da devolução.")
        }
        _ => None,
    };
    let page = ChargesPage { charges, chart: chart(tz, last, CHART_DAYS, &paid), nav, notice };
    Ok((token, render(&page)?).into_response())
}

/// `POST /admin/{slug}/charges/{id}/cancel`: withdraws a pending charge at its provider (through
/// the ledger, so a second click sends nothing); one paid meanwhile takes the paid path.
pub async fn cancel(
    State(state): State<AppState>,
    admin: Admin,
    Path((slug, id)): Path<(String, i64)>,
) -> Result<Response, ConsoleError> {
    let tenant = admin.tenant(&state, &slug).await?;
    let charge = state.store.charge(tenant.id, id).await?.ok_or(ConsoleError::NotFound)?;
    let result = if charge.status == "pending" {
        let withdrawals =
            Withdrawals::new(state.store.clone(), state.replier.clone(), state.gateways.clone(), LEDGER_LEASE);
        let by = format!("{BY_CONSOLE}{}", admin.email);
        match withdrawals.withdraw(&tenant, id, &by, Utc::now()).await? {
            Outcome::Executed(v) | Outcome::AlreadyDone(v) if v["status"] == "paid" => "paid",
            Outcome::Executed(_) | Outcome::AlreadyDone(_) => "cancelled",
            Outcome::AlreadyInProgress => "in_progress",
            other => {
                tracing::warn!(tenant = %tenant.id, charge = id, outcome = ?other, "a console cancellation failed");
                "failed"
            }
        }
    } else {
        "not_pending"
    };
    Ok(Redirect::to(&format!("/admin/{}/charges?ok={result}", tenant.slug)).into_response())
}

#[derive(Deserialize)]
pub struct RefundForm {
    amount: String,
}

/// `POST /admin/{slug}/charges/{id}/refund`: offers the refund to the staff on WhatsApp (the
/// refund action's buttons). Money moves only when a staff member taps Confirmar there, as for
/// every refund; the console proposes, it does not confirm.
pub async fn refund(
    State(state): State<AppState>,
    admin: Admin,
    Path((slug, id)): Path<(String, i64)>,
    Form(form): Form<RefundForm>,
) -> Result<Response, ConsoleError> {
    let tenant = admin.tenant(&state, &slug).await?;
    let charge = state.store.charge(tenant.id, id).await?.ok_or(ConsoleError::NotFound)?;
    let refundable = charge.refundable();
    let result = match Cents::parse_brl(form.amount.trim()) {
        _ if refundable.0 == 0 => "not_refundable",
        Ok(amount) if amount.0 > 0 && amount <= refundable => {
            let now = state.store.db_time(Utc::now());
            match offer_refund(&state.store, &state.replier, &tenant, &charge, amount, false, now).await? {
                0 => "no_staff",
                _ => "refund_offered",
            }
        }
        _ => "refund_amount",
    };
    tracing::info!(tenant = %tenant.id, charge = id, admin = %admin.email, result, "console refund");
    Ok(Redirect::to(&format!("/admin/{}/charges?ok={result}", tenant.slug)).into_response())
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;

    #[test]
    fn bars_sum_each_local_day_and_scale_to_the_tallest() {
        let tz: Tz = "America/Sao_Paulo".parse().unwrap_or(Tz::UTC);
        let last = NaiveDate::from_ymd_opt(2026, 3, 10).unwrap_or_default();
        let t = |d, h| Utc.with_ymd_and_hms(2026, 3, d, h, 0, 0).single().unwrap_or_default();
        // 02:00 UTC on the 10th is still the 9th in São Paulo; the 1st is outside 3 days.
        let paid = [(t(10, 2), 1000), (t(9, 15), 500), (t(10, 15), 3000), (t(1, 15), 999)];
        let c = chart(tz, last, 3, &paid);
        let cents: Vec<i64> = c.bars.iter().map(|b| b.cents).collect();
        assert_eq!(cents, [0, 1500, 3000]);
        assert_eq!((c.total_cents, c.total.as_str()), (4500, "R$ 45,00"));
        assert_eq!(c.bars[2].height, CHART_HEIGHT);
        assert_eq!(c.bars[1].height, CHART_HEIGHT / 2);
        assert_eq!((c.bars[0].height, c.bars[0].y), (0, CHART_HEIGHT));
    }
}
