//! The merchant cancels or moves an appointment from the console, through the same ledger as
//! the bot: two write tools (`console_cancel_booking`, `console_move_booking`) run by the
//! [`Executor`] with a console call context (the appointment's customer and conversation, no
//! turn). Their keys come from business identity (the appointment; the appointment and its
//! target slot and professional), never from the request, so a repeated POST replays the
//! stored outcome and changes nothing more.
//!
//! The customer is told through the outbox under a key derived from the ledger row that did
//! it (its id and generation): a repeat, or a retry after a crash between the change and the
//! message, queues nothing more, while a later real change (moved back, then again) is a new
//! generation and is told.

use std::time::Duration;

use askama::Template;
use async_trait::async_trait;
use axum::Form;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Redirect, Response};
use chrono::{NaiveDate, NaiveTime, TimeZone, Utc};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::domain::ContactId;
use crate::http::AppState;
use crate::http::console::auth::Admin;
use crate::http::console::error::ConsoleError;
use crate::ledger::normalize::parse_instant;
use crate::ledger::{
    CallContext, Effect, Executor, FieldKind, FieldSpec, KeyPolicy, Outcome, Reach, Tool, ToolCall, ToolFailure,
    ToolSpec,
};
use crate::store::{ChargeStore, ConsoleAgendaStore, InboundStore, OutboxStore, Store};
use crate::tenant::Tenant;
use crate::whatsapp::OutboundMessage;

/// How long a console change may hold its ledger row.
pub(crate) const LEDGER_LEASE: Duration = Duration::from_secs(30);
/// `tool_use_id` of console calls: who made them (shown in the appointment's history).
pub(crate) const BY_CONSOLE: &str = "console:";

pub static CONSOLE_CANCEL: ToolSpec = ToolSpec {
    name: "console_cancel_booking",
    description: "The merchant cancels an appointment from the console (never offered to the model).",
    effect: Effect::Write {
        policy: KeyPolicy::Business,
        on_conflict: "This appointment was already cancelled.",
        reach: Reach::Local,
    },
    fields: &[FieldSpec { name: "booking_id", kind: FieldKind::Id, required: true, identity: true, description: "" }],
};

pub static CONSOLE_MOVE: ToolSpec = ToolSpec {
    name: "console_move_booking",
    description: "The merchant moves an appointment from the console (never offered to the model).",
    effect: Effect::Write {
        policy: KeyPolicy::Business,
        on_conflict: "This appointment was already moved there.",
        reach: Reach::Local,
    },
    fields: &[
        FieldSpec { name: "booking_id", kind: FieldKind::Id, required: true, identity: true, description: "" },
        FieldSpec { name: "starts_at", kind: FieldKind::Instant, required: true, identity: true, description: "" },
        FieldSpec { name: "professional_id", kind: FieldKind::Id, required: true, identity: true, description: "" },
    ],
};

struct ConsoleCancel {
    store: Store,
}

#[async_trait]
impl Tool for ConsoleCancel {
    fn spec(&self) -> &'static ToolSpec {
        &CONSOLE_CANCEL
    }

    async fn run(&self, call: &ToolCall<'_>) -> Result<Value, ToolFailure> {
        let id = call.args.i64("booking_id").unwrap_or_default();
        crate::appointments::cancel(&self.store, call, id).await
    }
}

struct ConsoleMove {
    store: Store,
}

#[async_trait]
impl Tool for ConsoleMove {
    fn spec(&self) -> &'static ToolSpec {
        &CONSOLE_MOVE
    }

    async fn run(&self, call: &ToolCall<'_>) -> Result<Value, ToolFailure> {
        let id = call.args.i64("booking_id").unwrap_or_default();
        let professional = call.args.i64("professional_id");
        let start = call.args.str("starts_at").and_then(|s| parse_instant(s).ok()).ok_or_else(|| {
            ToolFailure::Permanent { message: "starts_at must be an instant".into(), details: Value::Null }
        })?;
        crate::appointments::move_booking(&self.store, call, id, start, professional).await
    }
}

/// What the customer reads when the merchant changed their appointment.
#[derive(Template)]
#[template(path = "messages/console_booking.txt")]
struct ConsoleMessage<'a> {
    text: ConsoleText<'a>,
}

enum ConsoleText<'a> {
    Cancelled { business: &'a str, service: &'a str, when: &'a str },
    Moved { business: &'a str, service: &'a str, professional: &'a str, when: &'a str },
}

#[derive(Deserialize)]
pub struct MoveForm {
    #[serde(default)]
    date: String,
    #[serde(default)]
    time: String,
    /// Empty: the same professional.
    #[serde(default)]
    professional: String,
}

fn back(tenant: &Tenant, id: i64, query: &str) -> Response {
    Redirect::to(&format!("/admin/{}/appointments/{id}?{query}", tenant.slug)).into_response()
}

pub async fn cancel(
    State(state): State<AppState>,
    admin: Admin,
    Path((slug, id)): Path<(String, i64)>,
) -> Result<Response, ConsoleError> {
    let tenant = admin.tenant(&state, &slug).await?;
    let tool = ConsoleCancel { store: state.store.clone() };
    let result = change(&state, &tenant, &admin, id, &tool, json!({ "booking_id": id })).await?;
    Ok(back(&tenant, id, &result.map_or_else(|code| format!("erro={code}"), |told| ok_code("cancelled", told))))
}

pub async fn move_to(
    State(state): State<AppState>,
    admin: Admin,
    Path((slug, id)): Path<(String, i64)>,
    Form(form): Form<MoveForm>,
) -> Result<Response, ConsoleError> {
    let tenant = admin.tenant(&state, &slug).await?;
    let current = state.store.appointment_detail(tenant.id, id).await?.ok_or(ConsoleError::NotFound)?.appointment;
    let date = NaiveDate::parse_from_str(form.date.trim(), "%Y-%m-%d").ok();
    let time = NaiveTime::parse_from_str(form.time.trim(), "%H:%M").ok();
    let start = date
        .zip(time)
        .and_then(|(d, t)| tenant.timezone.from_local_datetime(&d.and_time(t)).single())
        .map(|t| t.with_timezone(&Utc));
    let professional = match form.professional.trim() {
        "" => Some(current.professional_id),
        raw => raw.parse::<i64>().ok(),
    };
    let (Some(start), Some(professional)) = (start, professional) else {
        return Ok(back(&tenant, id, "erro=invalid"));
    };
    if start == current.starts_at && professional == current.professional_id {
        return Ok(back(&tenant, id, "erro=same"));
    }
    let tool = ConsoleMove { store: state.store.clone() };
    let input = json!({ "booking_id": id, "starts_at": start.to_rfc3339(), "professional_id": professional });
    let result = change(&state, &tenant, &admin, id, &tool, input).await?;
    Ok(back(&tenant, id, &result.map_or_else(|code| format!("erro={code}"), |told| ok_code("moved", told))))
}

/// Runs a console tool on appointment `id` and tells the customer; `Err(code)` is a refusal to
/// show on the page.
async fn change(
    state: &AppState,
    tenant: &Tenant,
    admin: &Admin,
    id: i64,
    tool: &dyn Tool,
    input: Value,
) -> Result<Result<Told, &'static str>, ConsoleError> {
    let store = &state.store;
    let detail = store.appointment_detail(tenant.id, id).await?.ok_or(ConsoleError::NotFound)?;
    let customer = ContactId(detail.appointment.contact_id);
    let conversation = store
        .conversation_of_contact(tenant.id, customer)
        .await?
        .ok_or_else(|| anyhow::anyhow!("appointment {id} has no conversation"))?;
    let who = format!("{BY_CONSOLE}{}", admin.email);
    let ctx = CallContext {
        tool_use_id: Some(&who),
        ..CallContext::outside_turn(tenant, customer, conversation, Utc::now())
    };
    let outcome = Executor::new(store.clone(), LEDGER_LEASE).execute(tool, &ctx, &input).await?;
    match outcome {
        Outcome::Executed(_) | Outcome::AlreadyDone(_) => {
            Ok(Ok(tell_customer(state, tenant, id, tool.spec().name, conversation).await?))
        }
        Outcome::Failed { error, details } => Ok(Err(refusal(&error, &details))),
        Outcome::AlreadyInProgress => Ok(Err("in_progress")),
        Outcome::Conflict { .. } => Ok(Err("conflict")),
        Outcome::Invalid(_) => Ok(Err("invalid")),
        Outcome::Retryable { error } => {
            tracing::warn!(appointment = id, error, "a console change failed; nothing was done");
            Ok(Err("failed"))
        }
    }
}

/// The page's code for a change done: `ok=moved`, or `ok=moved_untold` when the customer could
/// not be told.
fn ok_code(change: &str, told: Told) -> String {
    match told {
        Told::Yes => format!("ok={change}"),
        Told::OutsideWindow => format!("ok={change}_untold"),
    }
}

/// The page's code for a refusal the ledger stored.
fn refusal(error: &str, details: &Value) -> &'static str {
    match details["reason"].as_str() {
        Some("slot_taken") => "slot_taken",
        Some("not_available") => "not_available",
        Some("customer_busy") => "customer_busy",
        Some("already_started") => "already_started",
        _ if error.starts_with("not found") || error.contains("not found") => "not_active",
        _ => "failed",
    }
}

/// Whether the customer could be told of a change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Told {
    Yes,
    /// Outside WhatsApp's 24-hour window: a free-form message would be refused, so none is
    /// queued and the merchant is asked to tell the customer another way.
    OutsideWindow,
}

/// Queues the customer's notice of what the ledger row of `tool` about appointment `id` did.
async fn tell_customer(
    state: &AppState,
    tenant: &Tenant,
    id: i64,
    tool: &str,
    conversation: crate::domain::ConversationId,
) -> Result<Told, ConsoleError> {
    let store = &state.store;
    let last = store.last_inbound_at(tenant.id, conversation).await?;
    if !crate::money::charges::inside_window(last, store.db_time(Utc::now())) {
        return Ok(Told::OutsideWindow);
    }
    let subject = format!("appointment:{id}");
    let rows = store.ledger_entries(tenant.id, &subject, None).await?;
    let Some(row) = rows.iter().rev().find(|r| r.tool == tool && r.status == "succeeded") else {
        // Superseded since by another change: that one tells the customer.
        return Ok(Told::Yes);
    };
    let Some(now) = store.appointment_detail(tenant.id, id).await? else { return Ok(Told::Yes) };
    let when = crate::messages::when_at(tenant.timezone, now.appointment.starts_at);
    let service = now.service.as_deref().unwrap_or("atendimento");
    let text = match tool {
        t if t == CONSOLE_CANCEL.name => ConsoleText::Cancelled { business: &tenant.name, service, when: &when },
        _ => ConsoleText::Moved {
            business: &tenant.name,
            service,
            professional: now.professional.as_deref().unwrap_or("nossa equipe"),
            when: &when,
        },
    };
    let body = crate::messages::render(&ConsoleMessage { text }).map_err(ConsoleError::Internal)?;
    let message = OutboundMessage::text(body).map_err(|e| ConsoleError::Internal(e.into()))?;
    let to = state.replier.destination(tenant, conversation).await?;
    let key = format!("console:{tool}:{}:{}", row.id, row.generation);
    let Some(new) = to.message(key, message) else {
        return Err(ConsoleError::Internal(anyhow::anyhow!("invalid outbox key")));
    };
    let queued = store.enqueue_outbound(&new, store.db_time(Utc::now())).await?;
    if queued.is_some() && !to.local {
        state.replier.wake();
    }
    Ok(Told::Yes)
}
