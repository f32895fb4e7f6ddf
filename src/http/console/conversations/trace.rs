//! What the bot did, per job (a turn of messages or a button click): the job, its model calls,
//! its tool calls from the ledger, the actions it proposed or decided, the charges, and the
//! messages it queued, with a one-line Portuguese summary.
//!
//! Invariants: a ledger row reads "desfeito depois" only when an effect was undone (a booking
//! cancelled or moved later); a proposal's row is superseded whenever its proposal is answered,
//! replaced or expires, which undoes nothing, so it reads as the proposal's fate. Nothing here
//! queries (see `view`).

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use chrono_tz::Tz;

use super::labels;
use super::view::local;
use crate::domain::{ActionId, ClickId};
use crate::ledger::ExecutionRecord;
use crate::store::{ActionRow, ChargeRow, InboundRow, ModelCall, OutboundRecord, TurnRow};

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

pub struct ActionView {
    pub id: String,
    pub kind: String,
    pub kind_label: &'static str,
    pub status: String,
    pub status_label: &'static str,
    pub offer: String,
    pub error: Option<String>,
    pub at: String,
    pub(super) created: DateTime<Utc>,
    pub(super) offer_key: Option<String>,
}

pub struct ChargeView {
    pub id: i64,
    pub status: String,
    pub status_label: &'static str,
    pub amount: String,
    pub description: String,
    pub delivery: &'static str,
    pub at: String,
    pub(super) created: DateTime<Utc>,
}

pub struct OutView {
    pub key: String,
    pub status: String,
    pub status_label: &'static str,
    pub summary: String,
    pub error: Option<String>,
}

/// A message a job answered, with the button or row id it carried.
pub struct MessageRef {
    pub text: String,
    pub reply_id: Option<String>,
}

/// What one job did.
pub struct TurnView {
    pub id: i64,
    pub kind: String,
    pub kind_label: &'static str,
    pub state: String,
    pub state_label: &'static str,
    pub attempts: i64,
    pub max_attempts: i64,
    pub last_error: Option<String>,
    pub at: String,
    /// One line, in Portuguese, of what happened.
    pub summary: String,
    /// The customer's messages this job answered.
    pub messages: Vec<MessageRef>,
    pub calls: Vec<CallView>,
    pub tools: Vec<ToolView>,
    /// Actions this turn proposed.
    pub actions: Vec<ActionView>,
    /// The action a click decided (also listed under the turn that proposed it).
    pub decided: Vec<ActionView>,
    pub charges: Vec<ChargeView>,
    pub outbound: Vec<OutView>,
    pub(super) created: DateTime<Utc>,
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

/// The traced jobs (newest first) and the actions and charges none of them accounts for.
pub struct Trace {
    pub turns: Vec<TurnView>,
    pub other_actions: Vec<ActionView>,
    pub other_charges: Vec<ChargeView>,
}

/// The action a proposal's ledger row offered (`crate::actions::propose::proposal_json`).
fn proposed_action(e: &ExecutionRecord) -> Option<&str> {
    let result = &e.result.as_ref()?.0;
    (result["status"] == "awaiting_confirmation").then(|| result["action_id"].as_str()).flatten()
}

fn tool_view(e: &ExecutionRecord, actions: &[ActionRow]) -> ToolView {
    let proposal = proposed_action(e);
    let outcome = match (e.status.as_str(), e.replay_count, proposal) {
        ("succeeded", _, Some(_)) => ("pending", "proposta enviada"),
        // Released when the proposal left `pending`: its fate, not an undo.
        ("superseded", _, Some(id)) => match actions.iter().find(|a| a.id == id).map(|a| a.status.as_str()) {
            Some("confirmed" | "executed" | "failed" | "declined" | "cancelled") => ("muted", "proposta respondida"),
            Some("expired") => ("expired", "proposta expirou"),
            Some("superseded") => ("muted", "proposta substituída"),
            _ => ("muted", "proposta encerrada"),
        },
        ("succeeded", 0, None) => ("executed", "executado"),
        ("succeeded", _, None) => ("executed", "já feito"),
        ("running", ..) => ("running", "em andamento"),
        ("outcome_unknown", ..) => ("pending", "resultado incerto"),
        ("refused", ..) => ("conflict", "recusado"),
        // Outside proposals, only undoing an effect supersedes its row (`crate::ledger`).
        ("superseded", ..) => ("muted", "desfeito depois"),
        ("failed_permanent" | "failed_transient", ..) => ("failed", "falhou"),
        _ => ("muted", "desconhecido"),
    };
    let note = (e.replay_count > 0).then(|| {
        if e.status == "succeeded" && proposal.is_none() {
            format!("repetido {}×, executado 1×", e.replay_count)
        } else {
            format!("repetido {}×", e.replay_count)
        }
    });
    ToolView { tool: e.tool.clone(), key: e.idempotency_key.clone(), outcome, note, error: e.error.clone() }
}

pub fn action_view(a: &ActionRow, zone: Tz) -> ActionView {
    ActionView {
        id: a.id.clone(),
        kind: a.kind.clone(),
        kind_label: labels::action_kind(&a.kind),
        status: a.status.clone(),
        status_label: labels::action_status(&a.status),
        offer: a.offer_text.clone(),
        error: a.error.clone(),
        at: local(a.created_at, zone),
        created: a.created_at,
        offer_key: a.offer_key.clone(),
    }
}

pub fn charge_view(c: &ChargeRow, zone: Tz) -> ChargeView {
    ChargeView {
        id: c.id,
        status: c.status.clone(),
        status_label: labels::charge_status(&c.status),
        amount: crate::domain::Cents(c.amount_cents).to_string(),
        description: c.description.clone(),
        delivery: labels::charge_delivery(&c.delivery),
        at: local(c.created_at, zone),
        created: c.created_at,
    }
}

/// The outbox key prefix of an action's messages (`action:<uuid simple>:…`).
fn action_prefix(id: &str) -> Option<String> {
    ActionId::parse(id).map(|a| format!("action:{}:", a.0.simple()))
}

/// Whether job `turn` wrote the outbox key: its replies and handoff notices name it; the offers
/// of the actions it proposed name those; a click's outcome notice names its action, and goes
/// to the first click on it (`outcome_of`).
fn queued_by(key: &str, turn: i64, offers: &[String], outcome_of: Option<&str>) -> bool {
    let mut parts = key.split(':');
    let own = matches!((parts.next(), parts.next()), (Some("turn" | "handoff"), Some(id)) if id == turn.to_string());
    own || offers.iter().any(|p| key.strip_prefix(p.as_str()).is_some_and(|rest| rest.starts_with("offer")))
        || outcome_of.is_some_and(|p| key.strip_prefix(p) == Some("outcome"))
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The trace's one-line summary, e.g. "O bot respondeu · 2 ferramentas · 1 ação: agendamento feito".
fn summary(t: &TurnView) -> String {
    let replied = !t.outbound.is_empty();
    let head = match (t.state.as_str(), t.kind.as_str()) {
        ("available", _) => "Na fila para o bot".to_owned(),
        ("running", _) => "O bot está respondendo".to_owned(),
        ("retryable", _) => format!("Falhou na tentativa {}/{}; vai tentar de novo", t.attempts, t.max_attempts),
        ("dead", _) => {
            let attempts = usize::try_from(t.attempts).unwrap_or_default();
            format!("O bot falhou depois de {}", plural(attempts, "tentativa", "tentativas"))
        }
        ("completed", "click") if replied => "O bot respondeu ao toque".to_owned(),
        ("completed", "click") => "Toque tratado, sem resposta".to_owned(),
        ("completed", _) if replied => "O bot respondeu".to_owned(),
        ("completed", _) => "O bot ficou em silêncio".to_owned(),
        _ => "Situação desconhecida".to_owned(),
    };
    let mut parts = vec![head];
    if !t.tools.is_empty() {
        parts.push(plural(t.tools.len(), "ferramenta", "ferramentas"));
    }
    let mut seen = HashSet::new();
    let actions: Vec<String> = t
        .actions
        .iter()
        .chain(&t.decided)
        .filter(|a| seen.insert(a.id.as_str()))
        .map(|a| format!("{} {}", a.kind_label, labels::action_status_for(&a.kind, &a.status)))
        .collect();
    if !actions.is_empty() {
        parts.push(format!("{}: {}", plural(actions.len(), "ação", "ações"), actions.join(", ")));
    }
    parts.extend(t.charges.iter().map(|c| format!("cobrança nº {}: {}", c.id, c.status_label)));
    parts.join(" · ")
}

/// The trace of every job read, and the actions and charges no shown job accounts for.
pub fn trace(rows: &TraceRows<'_>, zone: Tz) -> Trace {
    // A click's job holds its one message; its reply id names the action it decided.
    let clicked = |turn: i64| {
        rows.inbound.iter().filter(|m| m.turn_id == Some(turn)).find_map(|m| ClickId::parse(m.reply_id.as_deref()?))
    };
    let mut first_click: HashMap<ActionId, i64> = HashMap::new();
    for t in rows.turns.iter().filter(|t| t.kind == "click") {
        if let Some(click) = clicked(t.id) {
            first_click.entry(click.action).and_modify(|id| *id = (*id).min(t.id)).or_insert(t.id);
        }
    }
    let mut used_actions: HashSet<&str> = HashSet::new();
    let mut used_charges: HashSet<i64> = HashSet::new();
    let mut turns = Vec::with_capacity(rows.turns.len());
    for t in rows.turns {
        let executions: Vec<&ExecutionRecord> = rows.executions.iter().filter(|e| e.turn_id == Some(t.id)).collect();
        let keys: HashSet<&str> = executions.iter().map(|e| e.idempotency_key.as_str()).collect();
        let proposed: HashSet<&str> = executions.iter().filter_map(|e| proposed_action(e)).collect();
        let actions: Vec<&ActionRow> = rows
            .actions
            .iter()
            .filter(|a| {
                (t.trigger_message_id.is_some() && a.proposed_by == t.trigger_message_id)
                    || proposed.contains(a.id.as_str())
            })
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
        let click = if t.kind == "click" { clicked(t.id) } else { None };
        let decided: Vec<ActionView> = click
            .and_then(|c| rows.actions.iter().find(|a| ActionId::parse(&a.id) == Some(c.action)))
            .map(|a| action_view(a, zone))
            .into_iter()
            .collect();
        let offers: Vec<String> = actions.iter().filter_map(|a| action_prefix(&a.id)).collect();
        let outcome_of = click
            .filter(|c| first_click.get(&c.action) == Some(&t.id))
            .map(|c| format!("action:{}:", c.action.0.simple()));
        let mut view = TurnView {
            id: t.id,
            kind: t.kind.clone(),
            kind_label: labels::turn_kind(&t.kind),
            state: t.state.clone(),
            state_label: labels::job_state(&t.state),
            attempts: t.attempts,
            max_attempts: t.max_attempts,
            last_error: t.last_error.clone(),
            at: local(t.created_at, zone),
            summary: String::new(),
            messages: rows
                .inbound
                .iter()
                .filter(|m| m.turn_id == Some(t.id))
                .map(|m| MessageRef {
                    text: m.body.clone().unwrap_or_else(|| format!("[{}]", m.kind)),
                    reply_id: m.reply_id.clone(),
                })
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
            tools: executions.iter().map(|e| tool_view(e, rows.actions)).collect(),
            actions: actions.iter().map(|a| action_view(a, zone)).collect(),
            decided,
            charges: charges.iter().map(|c| charge_view(c, zone)).collect(),
            outbound: rows
                .outbound
                .iter()
                .filter(|o| queued_by(&o.idempotency_key, t.id, &offers, outcome_of.as_deref()))
                .map(|o| OutView {
                    key: o.idempotency_key.clone(),
                    status: o.status.clone(),
                    status_label: labels::outbound_status(&o.status),
                    summary: o.message.0.body().chars().take(80).collect(),
                    error: o.last_error.clone(),
                })
                .collect(),
            created: t.created_at,
        };
        view.summary = summary(&view);
        turns.push(view);
    }
    let other_actions =
        rows.actions.iter().filter(|a| !used_actions.contains(a.id.as_str())).map(|a| action_view(a, zone)).collect();
    let other_charges =
        rows.charges.iter().filter(|c| !used_charges.contains(&c.id)).map(|c| charge_view(c, zone)).collect();
    Trace { turns, other_actions, other_charges }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_queued_its_replies_its_offers_and_its_clicks_outcome() {
        let offers = vec!["action:0a1b:".to_owned()];
        assert!(queued_by("turn:12:0", 12, &[], None));
        assert!(queued_by("handoff:12:7", 12, &[], None));
        assert!(!queued_by("turn:120:0", 12, &[], None));
        assert!(queued_by("action:0a1b:offer", 12, &offers, None));
        assert!(queued_by("action:0a1b:offer:ff00", 12, &offers, None));
        assert!(!queued_by("action:0a1b:outcome", 12, &offers, None));
        assert!(queued_by("action:0a1b:outcome", 13, &[], Some("action:0a1b:")));
        assert!(!queued_by("action:0a1b:expired", 13, &[], Some("action:0a1b:")));
    }
}
