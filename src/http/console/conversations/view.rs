//! A conversation as the console shows it, built from stored rows: the transcript as the
//! customer saw it (inbound and outbound, by kind) and, per turn, what the bot did (job,
//! model calls, tool calls from the ledger, actions, charges, messages queued).
//!
//! Invariant: nothing here queries; it shapes what the store returned, so the page's cost is
//! the bounded queries in `crate::store::ConversationViewStore`.

use std::collections::HashSet;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;

use crate::ledger::ExecutionRecord;
use crate::store::{ActionRow, ChargeRow, ConversationSummary, InboundRow, ModelCall, OutboundRecord, TurnRow};
use crate::whatsapp::OutboundMessage;

pub fn local(at: DateTime<Utc>, zone: Tz) -> String {
    at.with_timezone(&zone).format("%d/%m/%Y %H:%M:%S").to_string()
}

/// Who the contact is, for people: the name they gave WhatsApp, else their number.
pub fn contact_label(c: &ConversationSummary) -> String {
    match (&c.profile_name, &c.wa_id, &c.user_id) {
        (Some(name), _, _) if !name.trim().is_empty() => name.clone(),
        (_, Some(wa), _) => format!("+{wa}"),
        (_, _, Some(user)) => user.clone(),
        _ => format!("Contato {}", c.contact_id),
    }
}

/// One message of the transcript.
pub struct Bubble {
    pub inbound: bool,
    pub at: String,
    /// What kind of message, in words.
    pub kind: String,
    pub text: String,
    pub footer: Option<String>,
    /// Button titles, list rows, a template's quick replies.
    pub options: Vec<String>,
    /// A Pix copia e cola or QR payload.
    pub code: Option<String>,
    /// Outbound: the delivery status (CSS class) and its label.
    pub status: Option<(String, &'static str)>,
    pub error: Option<String>,
    /// The outbox key (outbound) or the reply id (a button/list answer).
    pub reference: Option<String>,
    sort: (DateTime<Utc>, u8, i64),
}

pub fn status_label(status: &str) -> &'static str {
    match status {
        "local" => "local (não enviada)",
        "pending" => "na fila",
        "sending" => "enviando",
        "unknown" => "envio incerto",
        "sent" => "enviada",
        "delivered" => "entregue",
        "read" => "lida",
        "failed" => "falhou",
        _ => "?",
    }
}

fn inbound_bubble(row: &InboundRow, zone: Tz) -> Bubble {
    let kind = match row.kind.as_str() {
        "text" => "texto".to_owned(),
        "button_reply" => "resposta de botão".to_owned(),
        "list_reply" => "escolha na lista".to_owned(),
        "quick_reply" => "botão de modelo".to_owned(),
        "reaction" if row.body.is_some() => "reação".to_owned(),
        "reaction" => "reação removida".to_owned(),
        "edit" => "edição".to_owned(),
        "revoke" => "mensagem apagada".to_owned(),
        "number_change" => "trocou de número".to_owned(),
        "request_welcome" => "abriu a conversa".to_owned(),
        "image" => "imagem".to_owned(),
        "video" => "vídeo".to_owned(),
        "document" => "documento".to_owned(),
        "sticker" => "figurinha".to_owned(),
        "location" => "localização".to_owned(),
        "contacts" => "contato".to_owned(),
        "audio" => "áudio".to_owned(),
        other => match row.error_code {
            Some(code) => format!("mensagem do tipo {other} (erro {code} do WhatsApp)"),
            None => format!("mensagem do tipo {other}"),
        },
    };
    // A voice note shows what it said, or that it could not be heard.
    let footer = match (&row.transcript, &row.transcript_error) {
        (Some(text), _) => Some(format!("Transcrição: {text}")),
        (None, Some(_)) => Some("Não foi possível ouvir este áudio.".to_owned()),
        (None, None) => None,
    };
    Bubble {
        inbound: true,
        at: local(row.received_at, zone),
        kind,
        text: row.body.clone().unwrap_or_default(),
        footer,
        options: vec![],
        code: None,
        status: None,
        error: None,
        reference: row.reply_id.clone(),
        sort: (row.received_at, 0, row.id),
    }
}

fn outbound_bubble(row: &OutboundRecord, zone: Tz) -> Bubble {
    let (kind, text, footer, options, code) = match &row.message.0 {
        OutboundMessage::Text { body } => ("texto".to_owned(), body.clone(), None, vec![], None),
        OutboundMessage::Buttons { body, footer, buttons } => {
            ("botões".to_owned(), body.clone(), footer.clone(), buttons.iter().map(|b| b.title.clone()).collect(), None)
        }
        OutboundMessage::List { body, footer, button, sections } => (
            format!("lista ({button})"),
            body.clone(),
            footer.clone(),
            sections
                .iter()
                .flat_map(|s| &s.rows)
                .map(|r| match &r.description {
                    Some(d) => format!("{} — {d}", r.title),
                    None => r.title.clone(),
                })
                .collect(),
            None,
        ),
        OutboundMessage::Template { name, language, body_params, quick_replies } => {
            (format!("modelo {name} ({language})"), body_params.join(" · "), None, quick_replies.clone(), None)
        }
        OutboundMessage::QrImage { payload, caption } => {
            ("QR Code Pix".to_owned(), caption.clone().unwrap_or_default(), None, vec![], Some(payload.clone()))
        }
        OutboundMessage::OrderDetails { body, footer, amount, description, copia_e_cola, .. } => (
            format!("pedido Pix: {amount} — {description}"),
            body.clone(),
            footer.clone(),
            vec![],
            Some(copia_e_cola.clone()),
        ),
        OutboundMessage::OrderStatus { status, body, .. } => {
            (format!("status do pedido: {status}"), body.clone(), None, vec![], None)
        }
    };
    Bubble {
        inbound: false,
        at: local(row.created_at, zone),
        kind,
        text,
        footer,
        options,
        code,
        status: Some((row.status.clone(), status_label(&row.status))),
        error: row.last_error.clone(),
        reference: Some(row.idempotency_key.clone()),
        sort: (row.created_at, 1, row.id),
    }
}

/// The transcript: the last `limit` messages of both directions, oldest first.
pub struct Transcript {
    pub bubbles: Vec<Bubble>,
    /// Query string of the page of older messages, when there are some.
    pub older: Option<String>,
}

pub fn transcript(
    inbound: &[InboundRow],
    outbound: &[OutboundRecord],
    limit: usize,
    before: (Option<i64>, Option<i64>),
    zone: Tz,
) -> Transcript {
    let mut bubbles: Vec<Bubble> = inbound
        .iter()
        .map(|r| inbound_bubble(r, zone))
        .chain(outbound.iter().map(|r| outbound_bubble(r, zone)))
        .collect();
    bubbles.sort_by_key(|b| b.sort);
    let dropped = bubbles.len().saturating_sub(limit);
    let bubbles: Vec<Bubble> = bubbles.into_iter().skip(dropped).collect();
    // The next page starts below the oldest message kept of each direction.
    let oldest = |inbound: bool| bubbles.iter().filter(|b| b.inbound == inbound).map(|b| b.sort.2).min();
    let next_in = oldest(true).or_else(|| inbound.last().map(|r| r.id + 1)).or(before.0);
    let next_out = oldest(false).or_else(|| outbound.last().map(|r| r.id + 1)).or(before.1);
    let more = dropped > 0 || inbound.len() >= limit || outbound.len() >= limit;
    let older =
        more.then(|| format!("?before_in={}&before_out={}", next_in.unwrap_or(i64::MAX), next_out.unwrap_or(i64::MAX)));
    Transcript { bubbles, older }
}

pub struct CallView {
    pub seq: i64,
    pub request_id: String,
    pub stop: String,
    pub latency_ms: i64,
    pub input_tokens: i64,
    pub output_tokens: i64,
}

pub struct ToolView {
    pub tool: String,
    pub key: String,
    /// CSS class and label.
    pub outcome: (&'static str, &'static str),
    pub note: Option<String>,
    pub error: Option<String>,
}

fn tool_view(e: &ExecutionRecord) -> ToolView {
    let outcome = match (e.status.as_str(), e.replay_count) {
        ("succeeded", 0) => ("executed", "executado"),
        ("succeeded", _) => ("executed", "já feito"),
        ("running", _) => ("running", "em andamento"),
        ("outcome_unknown", _) => ("pending", "resultado incerto"),
        ("refused", _) => ("conflict", "recusado"),
        ("superseded", _) => ("muted", "desfeito depois"),
        ("failed_permanent" | "failed_transient", _) => ("failed", "falhou"),
        _ => ("muted", "?"),
    };
    let note = (e.replay_count > 0).then(|| {
        if e.status == "succeeded" {
            format!("repetido {}×, executado 1×", e.replay_count)
        } else {
            format!("repetido {}×", e.replay_count)
        }
    });
    ToolView { tool: e.tool.clone(), key: e.idempotency_key.clone(), outcome, note, error: e.error.clone() }
}

pub struct ActionView {
    pub id: String,
    pub kind: String,
    pub status: String,
    pub offer: String,
    pub error: Option<String>,
}

pub struct ChargeView {
    pub id: i64,
    pub status: String,
    pub amount: String,
    pub description: String,
    pub delivery: String,
}

fn action_view(a: &ActionRow) -> ActionView {
    ActionView {
        id: a.id.clone(),
        kind: a.kind.clone(),
        status: a.status.clone(),
        offer: a.offer_text.clone(),
        error: a.error.clone(),
    }
}

fn charge_view(c: &ChargeRow) -> ChargeView {
    ChargeView {
        id: c.id,
        status: c.status.clone(),
        amount: crate::domain::Cents(c.amount_cents).to_string(),
        description: c.description.clone(),
        delivery: c.delivery.clone(),
    }
}

pub struct OutView {
    pub key: String,
    pub status: String,
    pub status_label: &'static str,
    pub summary: String,
}

/// What one job did.
pub struct TurnView {
    pub id: i64,
    pub kind: String,
    pub state: String,
    pub attempts: i64,
    pub max_attempts: i64,
    pub last_error: Option<String>,
    pub at: String,
    /// The customer's messages this turn answered.
    pub messages: Vec<String>,
    pub calls: Vec<CallView>,
    pub tools: Vec<ToolView>,
    pub actions: Vec<ActionView>,
    pub charges: Vec<ChargeView>,
    pub outbound: Vec<OutView>,
}

/// Rows the trace is built from.
pub struct TraceRows<'a> {
    pub turns: &'a [TurnRow],
    pub inbound: &'a [InboundRow],
    pub outbound: &'a [OutboundRecord],
    pub calls: &'a [ModelCall],
    pub executions: &'a [ExecutionRecord],
    pub actions: &'a [ActionRow],
    pub charges: &'a [ChargeRow],
}

/// Whether the outbox key was written by job `turn` (its replies, or its handoff notices).
fn queued_by(key: &str, turn: i64) -> bool {
    let mut parts = key.split(':');
    matches!((parts.next(), parts.next()), (Some("turn" | "handoff"), Some(id)) if id == turn.to_string())
}

/// The trace, newest turn first, and the actions and charges no shown turn accounts for.
pub fn trace(rows: &TraceRows<'_>, zone: Tz) -> (Vec<TurnView>, Vec<ActionView>, Vec<ChargeView>) {
    let mut used_actions: HashSet<&str> = HashSet::new();
    let mut used_charges: HashSet<i64> = HashSet::new();
    let turns = rows
        .turns
        .iter()
        .map(|t| {
            let executions: Vec<&ExecutionRecord> =
                rows.executions.iter().filter(|e| e.turn_id == Some(t.id)).collect();
            let keys: HashSet<&str> = executions.iter().map(|e| e.idempotency_key.as_str()).collect();
            let actions: Vec<&ActionRow> = rows
                .actions
                .iter()
                .filter(|a| t.trigger_message_id.is_some() && a.proposed_by == t.trigger_message_id)
                .collect();
            let action_ids: HashSet<&str> = actions.iter().map(|a| a.id.as_str()).collect();
            let charges: Vec<&ChargeRow> = rows
                .charges
                .iter()
                .filter(|c| {
                    keys.contains(c.idempotency_key.as_str())
                        || c.action_id.as_deref().is_some_and(|a| action_ids.contains(a))
                })
                .collect();
            used_actions.extend(action_ids.iter().copied());
            used_charges.extend(charges.iter().map(|c| c.id));
            TurnView {
                id: t.id,
                kind: t.kind.clone(),
                state: t.state.clone(),
                attempts: t.attempts,
                max_attempts: t.max_attempts,
                last_error: t.last_error.clone(),
                at: local(t.created_at, zone),
                messages: rows
                    .inbound
                    .iter()
                    .filter(|m| m.turn_id == Some(t.id))
                    .map(|m| m.body.clone().unwrap_or_else(|| format!("[{}]", m.kind)))
                    .collect(),
                calls: rows
                    .calls
                    .iter()
                    .filter(|c| c.turn_id == t.id)
                    .map(|c| CallView {
                        seq: c.seq + 1,
                        request_id: c.request_id.clone().unwrap_or_else(|| "—".to_owned()),
                        stop: c.stop_reason.clone(),
                        latency_ms: c.latency_ms,
                        input_tokens: c.input_tokens,
                        output_tokens: c.output_tokens,
                    })
                    .collect(),
                tools: executions.iter().map(|e| tool_view(e)).collect(),
                actions: actions.iter().map(|a| action_view(a)).collect(),
                charges: charges.iter().map(|c| charge_view(c)).collect(),
                outbound: rows
                    .outbound
                    .iter()
                    .filter(|o| queued_by(&o.idempotency_key, t.id))
                    .map(|o| OutView {
                        key: o.idempotency_key.clone(),
                        status: o.status.clone(),
                        status_label: status_label(&o.status),
                        summary: o.message.0.body().chars().take(80).collect(),
                    })
                    .collect(),
            }
        })
        .collect();
    let actions = rows.actions.iter().filter(|a| !used_actions.contains(a.id.as_str())).map(action_view).collect();
    let charges = rows.charges.iter().filter(|c| !used_charges.contains(&c.id)).map(charge_view).collect();
    (turns, actions, charges)
}
