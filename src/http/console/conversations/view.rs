//! A conversation's messages as the console shows them, built from stored rows: bubbles as the
//! customer saw them (by kind, with WhatsApp's delivery marks) and the page of older ones.
//! `trace` adds what the bot did per turn and `timeline` weaves both into one list.
//!
//! Invariants: nothing here queries; it shapes what the store returned, so the page's cost is
//! the bounded queries in `crate::store::ConversationViewStore`. Internal ids (outbox keys,
//! reply ids) never print on a bubble's face: they stay in private fields for the timeline to
//! place and show inside a collapsed block.

use chrono::{DateTime, Utc};
use chrono_tz::Tz;

use super::labels;
use crate::store::{ConversationSummary, InboundRow, OutboundRecord};
use crate::whatsapp::OutboundMessage;

pub fn local(at: DateTime<Utc>, zone: Tz) -> String {
    at.with_timezone(&zone).format("%d/%m/%Y %H:%M:%S").to_string()
}

/// Day and minute, as a chat app labels a message (the full instant goes in a tooltip).
fn short(at: DateTime<Utc>, zone: Tz) -> String {
    at.with_timezone(&zone).format("%d/%m %H:%M").to_string()
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

/// An outbound message's delivery, drawn the way WhatsApp does.
pub struct Delivery {
    /// The raw outbox status (the CSS class).
    pub class: String,
    pub mark: &'static str,
    pub title: &'static str,
}

/// One message of the conversation.
pub struct Bubble {
    pub inbound: bool,
    /// "Cliente", "Bot" or "Atendente".
    pub who: &'static str,
    pub at: String,
    pub at_full: String,
    /// What kind of message, in words; `None` for plain text.
    pub kind: Option<String>,
    pub text: String,
    pub footer: Option<String>,
    /// Button titles, list rows, a template's quick replies.
    pub options: Vec<String>,
    /// A Pix copia e cola or QR payload.
    pub code: Option<String>,
    pub delivery: Option<Delivery>,
    pub error: Option<String>,
    /// Internal ids no shown turn accounts for (label, value): the page folds them away.
    pub ids: Vec<(&'static str, String)>,
    /// The job that answered this inbound message.
    pub(super) turn: Option<i64>,
    /// The outbox key (outbound) or the reply id (a button or list answer).
    pub(super) reference: Option<String>,
    pub(super) sort: (DateTime<Utc>, u8, i64),
}

impl Bubble {
    /// A stable id for the page (the script keeps open blocks open across reloads).
    pub fn anchor(&self) -> String {
        format!("{}{}", if self.inbound { "in" } else { "out" }, self.sort.2)
    }
}

fn inbound_bubble(row: &InboundRow, zone: Tz) -> Bubble {
    let kind = match row.kind.as_str() {
        "text" => None,
        "button_reply" => Some("resposta de botão".to_owned()),
        "list_reply" => Some("escolha na lista".to_owned()),
        "quick_reply" => Some("botão de modelo".to_owned()),
        "reaction" if row.body.is_some() => Some("reação".to_owned()),
        "reaction" => Some("reação removida".to_owned()),
        "edit" => Some("edição".to_owned()),
        "revoke" => Some("mensagem apagada".to_owned()),
        "number_change" => Some("trocou de número".to_owned()),
        "request_welcome" => Some("abriu a conversa".to_owned()),
        "image" => Some("imagem".to_owned()),
        "video" => Some("vídeo".to_owned()),
        "document" => Some("documento".to_owned()),
        "sticker" => Some("figurinha".to_owned()),
        "location" => Some("localização".to_owned()),
        "contacts" => Some("contato".to_owned()),
        "audio" => Some("áudio".to_owned()),
        other => Some(match row.error_code {
            Some(code) => format!("mensagem do tipo {other} (erro {code} do WhatsApp)"),
            None => format!("mensagem do tipo {other}"),
        }),
    };
    // A voice note shows what it said, or that it could not be heard.
    let footer = match (&row.transcript, &row.transcript_error) {
        (Some(text), _) => Some(format!("Transcrição: {text}")),
        (None, Some(_)) => Some("Não foi possível ouvir este áudio.".to_owned()),
        (None, None) => None,
    };
    Bubble {
        inbound: true,
        who: "Cliente",
        at: short(row.received_at, zone),
        at_full: local(row.received_at, zone),
        kind,
        // A tapped button or list row arrives with its title as the body.
        text: row.body.clone().unwrap_or_default(),
        footer,
        options: vec![],
        code: None,
        delivery: None,
        error: None,
        ids: vec![],
        turn: row.turn_id,
        reference: row.reply_id.clone(),
        sort: (row.received_at, 0, row.id),
    }
}

/// Who wrote an outbound message: a console reply is keyed `console:<conversation>:…`
/// (`handoff::reply`); everything else is the bot's.
fn author(row: &OutboundRecord) -> &'static str {
    let mut parts = row.idempotency_key.split(':');
    match (parts.next(), parts.next()) {
        (Some("console"), Some(id)) if id == row.conversation_id.to_string() => "Atendente",
        _ => "Bot",
    }
}

fn outbound_bubble(row: &OutboundRecord, zone: Tz) -> Bubble {
    let (kind, text, footer, options, code) = match &row.message.0 {
        OutboundMessage::Text { body } => (None, body.clone(), None, vec![], None),
        OutboundMessage::Buttons { body, footer, buttons } => (
            Some("botões".to_owned()),
            body.clone(),
            footer.clone(),
            buttons.iter().map(|b| b.title.clone()).collect(),
            None,
        ),
        OutboundMessage::List { body, footer, button, sections } => (
            Some(format!("lista ({button})")),
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
            (Some(format!("modelo {name} ({language})")), body_params.join(" · "), None, quick_replies.clone(), None)
        }
        OutboundMessage::QrImage { payload, caption } => {
            (Some("QR Code Pix".to_owned()), caption.clone().unwrap_or_default(), None, vec![], Some(payload.clone()))
        }
        OutboundMessage::OrderDetails { body, footer, amount, description, copia_e_cola, .. } => (
            Some(format!("pedido Pix: {amount} — {description}")),
            body.clone(),
            footer.clone(),
            vec![],
            Some(copia_e_cola.clone()),
        ),
        OutboundMessage::OrderStatus { status, body, .. } => {
            (Some(format!("status do pedido: {status}")), body.clone(), None, vec![], None)
        }
        OutboundMessage::Location { latitude, longitude, name, address } => (
            Some("localização".to_owned()),
            [name.as_deref(), address.as_deref()].into_iter().flatten().collect::<Vec<_>>().join(" — "),
            Some(format!("{latitude}, {longitude}")),
            vec![],
            None,
        ),
    };
    let (mark, title) = labels::delivery_mark(&row.status);
    Bubble {
        inbound: false,
        who: author(row),
        at: short(row.created_at, zone),
        at_full: local(row.created_at, zone),
        kind,
        text,
        footer,
        options,
        code,
        delivery: Some(Delivery { class: row.status.clone(), mark, title }),
        error: row.last_error.clone(),
        ids: vec![],
        turn: None,
        reference: Some(row.idempotency_key.clone()),
        sort: (row.created_at, 1, row.id),
    }
}

/// The last `limit` messages of both directions, oldest first.
pub struct Transcript {
    pub bubbles: Vec<Bubble>,
    /// Query string of the page of older messages, when there are some.
    pub older: Option<String>,
    /// Whether this is a page of older messages (newer ones exist past its end).
    pub paged: bool,
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
    Transcript { bubbles, older, paged: before.0.is_some() || before.1.is_some() }
}

#[cfg(test)]
mod tests {
    use sqlx::types::Json;

    use super::*;

    #[test]
    fn a_console_reply_is_the_attendants_and_every_other_message_the_bots() {
        let row = |key: &str| OutboundRecord {
            id: 1,
            conversation_id: 7,
            idempotency_key: key.into(),
            status: "read".into(),
            message: Json(OutboundMessage::text("oi").expect("a text")),
            provider_message_id: None,
            attempts: 1,
            last_error: None,
            created_at: Utc::now(),
        };
        assert_eq!(author(&row("console:7:0123abcd")), "Atendente");
        assert_eq!(author(&row("console:console_cancel:3:1")), "Bot");
        assert_eq!(author(&row("turn:12:0")), "Bot");
        let bubble = outbound_bubble(&row("turn:12:0"), chrono_tz::America::Sao_Paulo);
        assert_eq!(bubble.kind, None, "plain text needs no kind");
        assert!(bubble.delivery.is_some_and(|d| d.mark == "✓✓ lida" && d.class == "read"));
    }
}
