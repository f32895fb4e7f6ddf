//! Outbound messages, checked against the Cloud API limits when built and again before
//! sending (stored rows are data, and data can be old).

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::domain::PhoneE164;

// Limits from Meta's reply-button, list and text pages (characters, not bytes). Public so
// builders can clip to them by construction instead of failing validation.
pub const TEXT_BODY_MAX: usize = 4096;
pub const INTERACTIVE_BODY_MAX: usize = 1024;
pub const FOOTER_MAX: usize = 60;
pub const BUTTONS_MAX: usize = 3;
pub const BUTTON_TITLE_MAX: usize = 20;
pub const BUTTON_ID_MAX: usize = 256;
pub const LIST_BUTTON_MAX: usize = 20;
pub const LIST_SECTIONS_MAX: usize = 10;
/// Rows across all sections of one list.
pub const LIST_ROWS_MAX: usize = 10;
pub const LIST_ROW_ID_MAX: usize = 200;
pub const LIST_ROW_TITLE_MAX: usize = 24;
pub const LIST_ROW_DESCRIPTION_MAX: usize = 72;
pub const LIST_SECTION_TITLE_MAX: usize = 24;

/// `text` cut to at most `max` characters on a character boundary, ending in "…" when
/// something was cut, so a long catalog name shortens instead of breaking the message.
pub fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    if max == 0 {
        return String::new();
    }
    let mut clipped: String = text.chars().take(max.saturating_sub(1)).collect();
    clipped.push('…');
    clipped
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplyButton {
    pub id: String,
    pub title: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListRow {
    pub id: String,
    pub title: String,
    pub description: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListSection {
    pub title: Option<String>,
    pub rows: Vec<ListRow>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum OutboundMessage {
    Text {
        body: String,
    },
    Buttons {
        body: String,
        footer: Option<String>,
        buttons: Vec<ReplyButton>,
    },
    List {
        body: String,
        footer: Option<String>,
        /// The label of the button that opens the list.
        button: String,
        sections: Vec<ListSection>,
    },
}

#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum MessageError {
    #[error("{what} is empty")]
    Empty { what: &'static str },
    #[error("{what} has {len} characters; the limit is {max}")]
    TooLong { what: &'static str, len: usize, max: usize },
    #[error("{what}: {len} given; the limit is {max}")]
    TooMany { what: &'static str, len: usize, max: usize },
    #[error("{what} must be unique: {value:?} repeats")]
    Duplicate { what: &'static str, value: String },
}

fn check_len(what: &'static str, value: &str, max: usize) -> Result<(), MessageError> {
    // Meta counts characters, not bytes: "Confirmação" is 11, not 13.
    let len = value.chars().count();
    if value.trim().is_empty() {
        return Err(MessageError::Empty { what });
    }
    if len > max {
        return Err(MessageError::TooLong { what, len, max });
    }
    Ok(())
}

fn check_unique<'a>(what: &'static str, values: impl Iterator<Item = &'a str>) -> Result<(), MessageError> {
    let mut seen = std::collections::HashSet::new();
    for v in values {
        if !seen.insert(v) {
            return Err(MessageError::Duplicate { what, value: v.to_owned() });
        }
    }
    Ok(())
}

impl OutboundMessage {
    pub fn text(body: impl Into<String>) -> Result<Self, MessageError> {
        let m = Self::Text { body: body.into() };
        m.validate()?;
        Ok(m)
    }

    pub fn buttons(
        body: impl Into<String>,
        footer: Option<String>,
        buttons: Vec<ReplyButton>,
    ) -> Result<Self, MessageError> {
        let m = Self::Buttons { body: body.into(), footer, buttons };
        m.validate()?;
        Ok(m)
    }

    pub fn list(
        body: impl Into<String>,
        footer: Option<String>,
        button: impl Into<String>,
        sections: Vec<ListSection>,
    ) -> Result<Self, MessageError> {
        let m = Self::List { body: body.into(), footer, button: button.into(), sections };
        m.validate()?;
        Ok(m)
    }

    pub fn validate(&self) -> Result<(), MessageError> {
        match self {
            Self::Text { body } => check_len("text body", body, TEXT_BODY_MAX),
            Self::Buttons { body, footer, buttons } => {
                check_len("body", body, INTERACTIVE_BODY_MAX)?;
                if let Some(f) = footer {
                    check_len("footer", f, FOOTER_MAX)?;
                }
                if buttons.is_empty() {
                    return Err(MessageError::Empty { what: "buttons" });
                }
                if buttons.len() > BUTTONS_MAX {
                    return Err(MessageError::TooMany { what: "buttons", len: buttons.len(), max: BUTTONS_MAX });
                }
                for b in buttons {
                    check_len("button id", &b.id, BUTTON_ID_MAX)?;
                    check_len("button title", &b.title, BUTTON_TITLE_MAX)?;
                }
                check_unique("button title", buttons.iter().map(|b| b.title.as_str()))?;
                check_unique("button id", buttons.iter().map(|b| b.id.as_str()))
            }
            Self::List { body, footer, button, sections } => {
                check_len("body", body, INTERACTIVE_BODY_MAX)?;
                if let Some(f) = footer {
                    check_len("footer", f, FOOTER_MAX)?;
                }
                check_len("list button", button, LIST_BUTTON_MAX)?;
                if sections.is_empty() {
                    return Err(MessageError::Empty { what: "sections" });
                }
                if sections.len() > LIST_SECTIONS_MAX {
                    return Err(MessageError::TooMany {
                        what: "sections",
                        len: sections.len(),
                        max: LIST_SECTIONS_MAX,
                    });
                }
                let rows: usize = sections.iter().map(|s| s.rows.len()).sum();
                if rows == 0 {
                    return Err(MessageError::Empty { what: "rows" });
                }
                if rows > LIST_ROWS_MAX {
                    return Err(MessageError::TooMany { what: "rows", len: rows, max: LIST_ROWS_MAX });
                }
                for s in sections {
                    if let Some(t) = &s.title {
                        check_len("section title", t, LIST_SECTION_TITLE_MAX)?;
                    }
                    for r in &s.rows {
                        check_len("row id", &r.id, LIST_ROW_ID_MAX)?;
                        check_len("row title", &r.title, LIST_ROW_TITLE_MAX)?;
                        if let Some(d) = &r.description {
                            check_len("row description", d, LIST_ROW_DESCRIPTION_MAX)?;
                        }
                    }
                }
                check_unique("row id", sections.iter().flat_map(|s| &s.rows).map(|r| r.id.as_str()))
            }
        }
    }

    /// The text a person sees first, for logs, the simulator and tests.
    pub fn body(&self) -> &str {
        match self {
            Self::Text { body } | Self::Buttons { body, .. } | Self::List { body, .. } => body,
        }
    }

    /// The Graph API request body.
    pub fn to_graph_json(&self, to: &Recipient, callback_data: &str) -> Value {
        let mut v = json!({ "messaging_product": "whatsapp", "recipient_type": "individual" });
        match (&to.wa_id, &to.user_id) {
            (Some(phone), _) => v["to"] = json!(phone.as_str()),
            (None, Some(user)) => v["recipient"] = json!(user),
            (None, None) => {}
        }
        v["biz_opaque_callback_data"] = json!(callback_data);
        let footer = |f: &Option<String>| f.as_ref().map(|t| json!({ "text": t }));
        match self {
            Self::Text { body } => {
                v["type"] = json!("text");
                v["text"] = json!({ "preview_url": false, "body": body });
            }
            Self::Buttons { body, footer: f, buttons } => {
                v["type"] = json!("interactive");
                let mut interactive = json!({
                    "type": "button",
                    "body": { "text": body },
                    "action": { "buttons": buttons.iter().map(|b| json!({
                        "type": "reply", "reply": { "id": b.id, "title": b.title }
                    })).collect::<Vec<_>>() },
                });
                if let Some(f) = footer(f) {
                    interactive["footer"] = f;
                }
                v["interactive"] = interactive;
            }
            Self::List { body, footer: f, button, sections } => {
                v["type"] = json!("interactive");
                let sections: Vec<Value> = sections
                    .iter()
                    .map(|s| {
                        let rows: Vec<Value> = s
                            .rows
                            .iter()
                            .map(|r| {
                                let mut row = json!({ "id": r.id, "title": r.title });
                                if let Some(d) = &r.description {
                                    row["description"] = json!(d);
                                }
                                row
                            })
                            .collect();
                        let mut section = json!({ "rows": rows });
                        if let Some(t) = &s.title {
                            section["title"] = json!(t);
                        }
                        section
                    })
                    .collect();
                let mut interactive = json!({
                    "type": "list",
                    "body": { "text": body },
                    "action": { "button": button, "sections": sections },
                });
                if let Some(f) = footer(f) {
                    interactive["footer"] = f;
                }
                v["interactive"] = interactive;
            }
        }
        v
    }
}

/// Who receives a message: the `wa_id` we were written from, else the business-scoped user
/// id. Never a number rebuilt from user input (Brazil's ninth digit).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recipient {
    pub wa_id: Option<PhoneE164>,
    pub user_id: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn button(id: &str, title: &str) -> ReplyButton {
        ReplyButton { id: id.into(), title: title.into() }
    }

    #[test]
    fn button_limits() {
        assert!(OutboundMessage::buttons("ok?", None, vec![button("a", "Sim"), button("b", "Não")]).is_ok());
        let four = (0..4).map(|i| button(&i.to_string(), &format!("B{i}"))).collect();
        assert!(matches!(OutboundMessage::buttons("x", None, four), Err(MessageError::TooMany { .. })));
        // 20 characters with accents is fine; 21 is not.
        assert!(OutboundMessage::buttons("x", None, vec![button("a", "Confirmação agendada")]).is_ok());
        assert!(matches!(
            OutboundMessage::buttons("x", None, vec![button("a", "Confirmação agendadas")]),
            Err(MessageError::TooLong { len: 21, .. })
        ));
        assert!(matches!(
            OutboundMessage::buttons("x", None, vec![button(&"i".repeat(257), "a")]),
            Err(MessageError::TooLong { max: 256, .. })
        ));
        assert!(matches!(
            OutboundMessage::buttons("x", None, vec![button("a", "Sim"), button("b", "Sim")]),
            Err(MessageError::Duplicate { .. })
        ));
    }

    #[test]
    fn list_limits() {
        let rows = |n: usize| {
            (0..n).map(|i| ListRow { id: format!("r{i}"), title: format!("{i}:00"), description: None }).collect()
        };
        let ok =
            OutboundMessage::list("Escolha", None, "Ver horários", vec![ListSection { title: None, rows: rows(10) }]);
        assert!(ok.is_ok());
        let too_many = OutboundMessage::list(
            "Escolha",
            None,
            "Ver",
            vec![ListSection { title: None, rows: rows(6) }, ListSection { title: None, rows: rows(5) }],
        );
        assert!(matches!(too_many, Err(MessageError::TooMany { what: "rows", .. })));
        assert!(OutboundMessage::text("").is_err());
        assert!(OutboundMessage::text("a".repeat(4097)).is_err());
    }

    #[test]
    fn clip_counts_characters_and_marks_the_cut() {
        assert_eq!(clip("Confirmação", 11), "Confirmação");
        assert_eq!(clip("Confirmação", 10), "Confirmaç…");
        assert_eq!(clip("ããããã", 3).chars().count(), 3);
        assert_eq!(clip("👍👍👍", 2), "👍…");
        assert_eq!(clip("abc", 0), "");
        let long = "Corte ".repeat(20);
        assert!(OutboundMessage::buttons("x", None, vec![button("a", &clip(&long, BUTTON_TITLE_MAX))]).is_ok());
    }

    #[test]
    fn graph_json_shape() {
        let to = Recipient { wa_id: Some(PhoneE164::parse("5511999990000").unwrap()), user_id: None };
        let m = OutboundMessage::buttons("Confirma?", None, vec![button("act:1:yes", "Sim")]).unwrap();
        let v = m.to_graph_json(&to, "turn:1:0");
        assert_eq!(v["to"], "+5511999990000");
        assert_eq!(v["type"], "interactive");
        assert_eq!(v["interactive"]["action"]["buttons"][0]["reply"]["id"], "act:1:yes");
        assert_eq!(v["biz_opaque_callback_data"], "turn:1:0");
        let bsuid = Recipient { wa_id: None, user_id: Some("BR.1502576394655843".into()) };
        assert_eq!(OutboundMessage::text("oi").unwrap().to_graph_json(&bsuid, "k")["recipient"], "BR.1502576394655843");
    }
}
