//! One timeline of a conversation, oldest first: its messages as bubbles, each job's trace
//! right after the messages it answered, and the actions and charges no trace accounts for.
//!
//! Invariants:
//! - a job's trace follows the last of its messages on the page; a job with none there
//!   (a click on an older page, a turn not yet claimed) goes before the first message it
//!   queued, else at its time;
//! - an entry placed by time past either end of a page that has neighbours there belongs to
//!   that neighbouring page and is left out, so older pages do not gather today's traces;
//! - every internal id a bubble carries (outbox key, reply id) is shown once, folded: in the
//!   trace of the job that wrote or answered it, else in the bubble's own collapsed block.

use std::collections::HashSet;

use chrono::{DateTime, Utc};

use super::trace::{ActionView, ChargeView, Trace, TurnView};
use super::view::{Bubble, Transcript};

pub enum Entry {
    Message(Bubble),
    Turn(TurnView),
    Action(ActionView),
    Charge(ChargeView),
}

/// An entry and where it goes: before the bubble at `pos` (after the last when `pos` is the
/// number of bubbles), ordered among others there by time.
struct Placed {
    pos: usize,
    at: DateTime<Utc>,
    entry: Entry,
}

pub fn timeline(transcript: Transcript, trace: Trace) -> Vec<Entry> {
    let Transcript { mut bubbles, older, paged } = transcript;
    let times: Vec<DateTime<Utc>> = bubbles.iter().map(|b| b.sort.0).collect();
    let at_time = |at: DateTime<Utc>| {
        let pos = times.partition_point(|t| *t <= at);
        let elsewhere = (pos == 0 && older.is_some()) || (pos == times.len() && paged);
        (!elsewhere).then_some(pos)
    };
    let outbound_at = |key: &str| bubbles.iter().position(|b| !b.inbound && b.reference.as_deref() == Some(key));
    let mut placed = Vec::new();
    let mut answered: HashSet<i64> = HashSet::new();
    let mut queued: HashSet<String> = HashSet::new();
    for turn in trace.turns {
        let last_in = bubbles.iter().rposition(|b| b.inbound && b.turn == Some(turn.id));
        let first_out = turn.outbound.iter().filter_map(|o| outbound_at(&o.key)).min();
        let Some(pos) = last_in.map(|i| i + 1).or(first_out).or_else(|| at_time(turn.created)) else {
            continue;
        };
        answered.insert(turn.id);
        queued.extend(turn.outbound.iter().map(|o| o.key.clone()));
        placed.push(Placed { pos, at: turn.created, entry: Entry::Turn(turn) });
    }
    for action in trace.other_actions {
        // An offer the bot sent on its own (a reminder, a refund offer) sits before its buttons.
        let offer = action.offer_key.as_deref().and_then(outbound_at);
        if let Some(pos) = offer.or_else(|| at_time(action.created)) {
            placed.push(Placed { pos, at: action.created, entry: Entry::Action(action) });
        }
    }
    for charge in trace.other_charges {
        if let Some(pos) = at_time(charge.created) {
            placed.push(Placed { pos, at: charge.created, entry: Entry::Charge(charge) });
        }
    }
    for b in &mut bubbles {
        let shown = if b.inbound {
            b.turn.is_some_and(|t| answered.contains(&t))
        } else {
            b.reference.as_ref().is_some_and(|k| queued.contains(k))
        };
        if let (false, Some(reference)) = (shown, &b.reference) {
            let label = if b.inbound { "id da resposta" } else { "chave no outbox" };
            b.ids.push((label, reference.clone()));
        }
    }
    placed.sort_by_key(|p| (p.pos, p.at));
    let mut entries = Vec::with_capacity(bubbles.len() + placed.len());
    let mut placed = placed.into_iter().peekable();
    for (i, bubble) in bubbles.into_iter().enumerate() {
        while let Some(p) = placed.next_if(|p| p.pos <= i) {
            entries.push(p.entry);
        }
        entries.push(Entry::Message(bubble));
    }
    entries.extend(placed.map(|p| p.entry));
    entries
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;
    use sqlx::types::Json;

    use super::*;
    use crate::http::console::conversations::trace::{TraceRows, trace};
    use crate::http::console::conversations::view::transcript;
    use crate::store::{InboundRow, OutboundRecord, TurnRow};
    use crate::whatsapp::OutboundMessage;

    fn at(minute: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 3, 2, 14, minute, 0).single().expect("a valid instant")
    }

    fn inbound(id: i64, minute: u32, turn: i64, body: &str) -> InboundRow {
        InboundRow {
            id,
            provider_message_id: format!("wamid.{id}"),
            kind: "text".into(),
            body: Some(body.into()),
            reply_id: None,
            received_at: at(minute),
            turn_id: Some(turn),
            transcript: None,
            transcript_error: None,
            error_code: None,
        }
    }

    fn outbound(id: i64, minute: u32, key: &str, body: &str) -> OutboundRecord {
        OutboundRecord {
            id,
            conversation_id: 1,
            idempotency_key: key.into(),
            status: "local".into(),
            message: Json(OutboundMessage::text(body).expect("a text")),
            provider_message_id: None,
            attempts: 0,
            last_error: None,
            created_at: at(minute),
        }
    }

    fn turn(id: i64, minute: u32, state: &str) -> TurnRow {
        TurnRow {
            id,
            kind: "turn".into(),
            state: state.into(),
            attempts: 1,
            max_attempts: 5,
            last_error: None,
            trigger_message_id: None,
            created_at: at(minute),
        }
    }

    /// The timeline of the page showing the last `limit` messages below `before`, in words.
    fn page(limit: usize, before: (Option<i64>, Option<i64>)) -> Vec<String> {
        let all_in = [inbound(1, 0, 1, "oi"), inbound(2, 2, 2, "quero um corte")];
        let all_out = [
            outbound(1, 1, "turn:1:0", "olá"),
            outbound(2, 3, "turn:2:0", "marcado"),
            outbound(3, 5, "reminder:9", "lembrete"),
        ];
        let keep = |id: i64, below: Option<i64>| id < below.unwrap_or(i64::MAX);
        let ins: Vec<InboundRow> = all_in.into_iter().filter(|r| keep(r.id, before.0)).collect();
        let outs: Vec<OutboundRecord> = all_out.into_iter().filter(|r| keep(r.id, before.1)).collect();
        let turns = [turn(3, 4, "available"), turn(2, 2, "completed"), turn(1, 0, "completed")];
        let rows = TraceRows {
            turns: &turns,
            inbound: &ins,
            outbound: &outs,
            calls: &[],
            executions: &[],
            actions: &[],
            charges: &[],
        };
        let zone = chrono_tz::America::Sao_Paulo;
        timeline(transcript(&ins, &outs, limit, before, zone), trace(&rows, zone))
            .into_iter()
            .map(|e| match e {
                Entry::Message(b) if b.ids.is_empty() => b.text,
                Entry::Message(b) => format!("{} [{}]", b.text, b.ids[0].1),
                Entry::Turn(t) => format!("turno {}", t.id),
                Entry::Action(a) => a.id,
                Entry::Charge(c) => c.id.to_string(),
            })
            .collect()
    }

    #[test]
    fn each_trace_follows_its_message_and_precedes_its_reply() {
        assert_eq!(
            page(10, (None, None)),
            ["oi", "turno 1", "olá", "quero um corte", "turno 2", "marcado", "turno 3", "lembrete [reminder:9]"]
        );
    }

    #[test]
    fn a_page_keeps_only_the_traces_of_its_own_stretch() {
        // The newest page: the first turn's messages are a page back, and so is its trace.
        assert_eq!(page(3, (None, None)), ["quero um corte", "turno 2", "marcado", "turno 3", "lembrete [reminder:9]"]);
        // The page before it: its own turn, none of the newer ones.
        assert_eq!(page(3, (Some(2), Some(2))), ["oi", "turno 1", "olá"]);
    }
}
