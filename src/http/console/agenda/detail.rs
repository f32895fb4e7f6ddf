//! One appointment: who, what, when, how it came to be (the conversation, turn and ledger key
//! that booked it), every ledger row about it (tool, key, status, replays), the pending actions
//! about it and how they were decided, and the forms to cancel or move it.

use askama::Template;
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use axum_csrf::CsrfToken;
use chrono::Utc;
use chrono_tz::Tz;
use serde::Deserialize;

use super::changes::{BY_CONSOLE, CONSOLE_CANCEL, CONSOLE_MOVE};
use super::grid::status_label;
use super::long_date;
use crate::domain::{Cents, ContactId};
use crate::http::AppState;
use crate::http::console::auth::{Admin, csrf_field};
use crate::http::console::error::{ConsoleError, render};
use crate::http::console::page::{Nav, Section, local_time as at};
use crate::store::{ActionEntry, CatalogStore, ConsoleAgendaStore, InboundStore, LedgerEntry};

#[derive(Deserialize)]
pub struct DetailQuery {
    ok: Option<String>,
    erro: Option<String>,
}

pub struct Notice {
    pub ok: bool,
    pub text: &'static str,
}

/// The page's message for a code in its query string (codes only: no text travels in URLs).
fn notice(query: &DetailQuery) -> Option<Notice> {
    if let Some(code) = query.ok.as_deref() {
        let text = match code {
            "cancelled" => "Agendamento cancelado. O cliente foi avisado pelo WhatsApp.",
            "moved" => "Agendamento remarcado. O cliente foi avisado pelo WhatsApp.",
            "cancelled_untold" => {
                "Agendamento cancelado, mas o cliente NÃO foi avisado: a última mensagem dele tem mais de 24 horas e o WhatsApp só permite mensagens livres dentro dessa janela. Avise por outro meio."
            }
            "moved_untold" => {
                "Agendamento remarcado, mas o cliente NÃO foi avisado: a última mensagem dele tem mais de 24 horas e o WhatsApp só permite mensagens livres dentro dessa janela. Avise por outro meio."
            }
            _ => return None,
        };
        return Some(Notice { ok: true, text });
    }
    let text = match query.erro.as_deref()? {
        "slot_taken" => "Esse horário já está ocupado. Escolha outro.",
        "not_available" => {
            "Esse horário não está disponível: fora do expediente, antes da antecedência mínima ou além do limite da agenda."
        }
        "customer_busy" => "O cliente já tem outro agendamento nesse horário.",
        "already_started" => "Este agendamento já começou e não pode mais ser alterado.",
        "not_active" => "Este agendamento não está mais ativo.",
        "in_progress" => "Esta alteração já está em andamento. Recarregue a página em instantes.",
        "conflict" => "Já houve outra alteração parecida para este agendamento. Confira o histórico abaixo.",
        "invalid" => "Data, horário ou profissional inválido.",
        "same" => "O agendamento já está nesse horário e com esse profissional: nada mudou.",
        "failed" => "Não foi possível alterar o agendamento agora. Tente de novo.",
        _ => return None,
    };
    Some(Notice { ok: false, text })
}

pub struct Origin {
    pub conversation_id: i64,
    pub turn: Option<i64>,
    pub tool: String,
    pub key: String,
    pub at: String,
}

pub struct LedgerRow {
    pub what: &'static str,
    pub who: String,
    pub tool: String,
    pub key: String,
    pub status: String,
    pub replay_count: i64,
    pub conversation_id: i64,
    pub turn: Option<i64>,
    pub at: String,
    pub error: Option<String>,
}

pub struct ActionRow {
    pub id: String,
    pub kind: &'static str,
    pub status: String,
    pub offer_text: String,
    pub created: String,
    pub expires: String,
    pub how: String,
    pub by: String,
    pub decided: String,
}

pub struct Choice {
    pub id: i64,
    pub name: String,
    pub selected: bool,
}

#[derive(Template)]
#[template(path = "console/appointment.html")]
struct AppointmentPage {
    nav: Nav,
    id: i64,
    customer: String,
    phone: String,
    conversation_id: Option<i64>,
    service: String,
    professional: String,
    day: String,
    time: String,
    status: String,
    status_label: &'static str,
    price: String,
    deposit: Option<String>,
    hold_until: Option<String>,
    attendance: Option<String>,
    created: String,
    updated: String,
    key: Option<String>,
    origin: Option<Origin>,
    ledger: Vec<LedgerRow>,
    actions: Vec<ActionRow>,
    notice: Option<Notice>,
    can_change: bool,
    professionals: Vec<Choice>,
    move_date: String,
    move_time: String,
}

/// What a ledger row did to the appointment, and who asked.
fn describe(row: &LedgerEntry, actions: &[ActionEntry]) -> (&'static str, String) {
    let console = || row.tool_use_id.as_deref().and_then(|u| u.strip_prefix(BY_CONSOLE)).unwrap_or("?").to_owned();
    match row.tool.as_str() {
        "create_booking" => ("marcou", "assistente (IA) na conversa".to_owned()),
        "reschedule_booking" => ("remarcou", "assistente (IA), a pedido do cliente".to_owned()),
        t if t == CONSOLE_CANCEL.name => ("cancelou", format!("console: {}", console())),
        t if t == CONSOLE_MOVE.name => ("remarcou", format!("console: {}", console())),
        "execute_action" => {
            let id = row.arguments.0["action_id"].as_str().unwrap_or_default();
            match actions.iter().find(|a| a.id == id) {
                Some(a) => (
                    match a.kind.as_str() {
                        "booking" => "marcou",
                        "cancellation" => "cancelou",
                        "move" => "remarcou",
                        "attendance" => "confirmou presença",
                        _ => "executou",
                    },
                    format!("ação confirmada ({})", via_label(a.confirmed_via.as_deref())),
                ),
                None => ("executou", "ação confirmada".to_owned()),
            }
        }
        _ => ("executou", row.tool.clone()),
    }
}

fn via_label(via: Option<&str>) -> &'static str {
    match via {
        Some("button") => "botão no WhatsApp",
        Some("template_button") => "botão de modelo no WhatsApp",
        Some("typed") => "confirmação por texto",
        Some("simulator") => "simulador",
        Some(_) => "outro meio",
        None => "—",
    }
}

pub(crate) fn kind_label(kind: &str) -> &'static str {
    match kind {
        "booking" => "agendamento",
        "cancellation" => "cancelamento",
        "move" => "remarcação",
        "attendance" => "confirmação de presença",
        "charge" => "cobrança",
        _ => "outra",
    }
}

pub(crate) fn action_row(tz: Tz, a: &ActionEntry) -> ActionRow {
    ActionRow {
        id: a.id.clone(),
        kind: kind_label(&a.kind),
        status: a.status.clone(),
        offer_text: a.offer_text.clone(),
        created: at(tz, a.created_at),
        expires: at(tz, a.expires_at),
        how: if a.confirmed_via.is_some() { via_label(a.confirmed_via.as_deref()).to_owned() } else { String::new() },
        by: match (a.decided_in_simulator.as_deref(), a.confirmed_by, a.confirmed_by_name.as_deref()) {
            (Some(admin), _, _) => format!("via simulador, por {admin}"),
            (None, Some(_), Some(name)) if !name.trim().is_empty() => name.to_owned(),
            (None, Some(id), _) => format!("contato nº {id}"),
            (None, None, _) => String::new(),
        },
        decided: a.decided_at.map(|t| at(tz, t)).unwrap_or_default(),
    }
}

pub async fn page(
    State(state): State<AppState>,
    admin: Admin,
    token: CsrfToken,
    Path((slug, id)): Path<(String, i64)>,
    Query(query): Query<DetailQuery>,
) -> Result<Response, ConsoleError> {
    let tenant = admin.tenant(&state, &slug).await?;
    let nav = Nav::new(&admin, &tenant, csrf_field(&token)?, Section::Agenda);
    let tz = tenant.timezone;
    let store = &state.store;
    let d = store.appointment_detail(tenant.id, id).await?.ok_or(ConsoleError::NotFound)?;
    let a = &d.appointment;
    let subject = format!("appointment:{id}");
    let rows = store.ledger_entries(tenant.id, &subject, d.idempotency_key.as_deref()).await?;
    let action_ids: Vec<String> = rows
        .iter()
        .filter(|r| r.tool == "execute_action")
        .filter_map(|r| r.arguments.0["action_id"].as_str().map(str::to_owned))
        .collect();
    let actions = store.actions_about(tenant.id, &subject, &action_ids).await?;
    // The row that booked it: the oldest about it (its key, or the first booking tool).
    let origin = rows.iter().find(|r| matches!(r.tool.as_str(), "create_booking" | "execute_action")).map(|r| Origin {
        conversation_id: r.conversation_id,
        turn: r.turn_id,
        tool: r.tool.clone(),
        key: r.idempotency_key.clone(),
        at: at(tz, r.created_at),
    });
    let ledger = rows
        .iter()
        .map(|r| {
            let (what, who) = describe(r, &actions);
            LedgerRow {
                what,
                who,
                tool: r.tool.clone(),
                key: r.idempotency_key.clone(),
                status: r.status.clone(),
                replay_count: r.replay_count,
                conversation_id: r.conversation_id,
                turn: r.turn_id,
                at: at(tz, r.completed_at.unwrap_or(r.created_at)),
                error: r.error.clone(),
            }
        })
        .collect();
    let conversation_id = store.conversation_of_contact(tenant.id, ContactId(a.contact_id)).await?.map(|c| c.0);
    let (_, professionals) = store.catalog(tenant.id).await?;
    let local = a.starts_at.with_timezone(&tz);
    let page = AppointmentPage {
        id,
        customer: d.customer.clone().filter(|n| !n.trim().is_empty()).unwrap_or_else(|| "Cliente sem nome".to_owned()),
        phone: d.wa_id.as_deref().map(|w| format!("+{w}")).unwrap_or_default(),
        conversation_id,
        service: d.service.clone().unwrap_or_else(|| "Serviço removido".to_owned()),
        professional: d.professional.clone().unwrap_or_else(|| "Profissional removido".to_owned()),
        day: long_date(local.date_naive()),
        time: format!("{}–{}", local.format("%H:%M"), a.ends_at.with_timezone(&tz).format("%H:%M")),
        status: a.status.clone(),
        status_label: status_label(&a.status),
        price: Cents(a.price_cents).to_string(),
        deposit: (a.deposit_cents > 0).then(|| Cents(a.deposit_cents).to_string()),
        hold_until: a.awaiting_deposit().map(|t| at(tz, t)),
        attendance: d.attendance_confirmed_at.map(|t| at(tz, t)),
        created: at(tz, d.created_at),
        updated: at(tz, d.updated_at),
        key: d.idempotency_key.clone(),
        origin,
        ledger,
        actions: actions.iter().map(|x| action_row(tz, x)).collect(),
        notice: notice(&query),
        can_change: matches!(a.status.as_str(), "held" | "confirmed") && a.starts_at > Utc::now(),
        professionals: professionals
            .iter()
            .filter(|p| p.service_ids.contains(&a.service_id) || p.id == a.professional_id)
            .map(|p| Choice { id: p.id, name: p.name.clone(), selected: p.id == a.professional_id })
            .collect(),
        move_date: local.format("%Y-%m-%d").to_string(),
        move_time: local.format("%H:%M").to_string(),
        nav,
    };
    Ok((token, render(&page)?).into_response())
}
