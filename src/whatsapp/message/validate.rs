//! The Cloud API's limits, checked when a message is built and again before it is sent.

use super::*;

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
    #[error("{what} {value:?} is not {expected}")]
    Malformed { what: &'static str, value: String, expected: &'static str },
    /// The kind is sent by uploading its media first (the outbox sender does it).
    #[error("a {kind} message is sent by uploading its media first")]
    NeedsUpload { kind: &'static str },
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

/// Present and not blank; for fields whose length Meta leaves open.
pub(super) fn check_present(what: &'static str, value: &str) -> Result<(), MessageError> {
    check_len(what, value, usize::MAX)
}

pub(super) fn check_caption(caption: Option<&str>) -> Result<(), MessageError> {
    caption.map_or(Ok(()), |c| check_len("caption", c, IMAGE_CAPTION_MAX))
}

fn malformed(what: &'static str, value: &str, expected: &'static str) -> Result<(), MessageError> {
    Err(MessageError::Malformed { what, value: value.to_owned(), expected })
}

/// Decimal degrees within ±`max`, as Meta reads a location's coordinates.
fn check_degrees(what: &'static str, value: &str, max: f64) -> Result<(), MessageError> {
    match value.parse::<f64>() {
        Ok(d) if d.is_finite() && d.abs() <= max => Ok(()),
        _ => malformed(what, value, "decimal degrees on the map"),
    }
}

/// `pt_BR`, `en_US`, `en`, `fil`: a language, and a region in capitals after an underscore.
fn check_language(code: &str) -> Result<(), MessageError> {
    let (lang, region) = code.split_once('_').unwrap_or((code, ""));
    let lang_ok = (2..=3).contains(&lang.len()) && lang.bytes().all(|b| b.is_ascii_lowercase());
    let region_ok = !code.contains('_') || (region.len() == 2 && region.bytes().all(|b| b.is_ascii_uppercase()));
    if lang_ok && region_ok { Ok(()) } else { malformed("template language", code, "a language code like pt_BR") }
}

/// Meta refuses a parameter with a newline or tab, or with more than four spaces in a row.
fn check_template_param(param: &str) -> Result<(), MessageError> {
    check_len("template parameter", param, TEMPLATE_PARAM_MAX)?;
    let too_many_spaces = " ".repeat(TEMPLATE_PARAM_SPACES_MAX + 1);
    if param.contains(['\n', '\r', '\t']) || param.contains(&too_many_spaces) {
        return malformed("template parameter", param, "one line without tabs or more than four spaces in a row");
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

fn check_reference_id(id: &str) -> Result<(), MessageError> {
    check_len("order reference_id", id, ORDER_REFERENCE_ID_MAX)?;
    if !id.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.')) {
        return malformed("order reference_id", id, "letters, digits, '_', '-' and '.'");
    }
    Ok(())
}

impl OutboundMessage {
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
            Self::Template { name, language, body_params, quick_replies } => {
                check_len("template name", name, TEMPLATE_NAME_MAX)?;
                if !name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_') {
                    return malformed("template name", name, "lowercase letters, digits and underscores");
                }
                check_language(language)?;
                body_params.iter().try_for_each(|p| check_template_param(p))?;
                if quick_replies.len() > TEMPLATE_QUICK_REPLIES_MAX {
                    return Err(MessageError::TooMany {
                        what: "quick replies",
                        len: quick_replies.len(),
                        max: TEMPLATE_QUICK_REPLIES_MAX,
                    });
                }
                for q in quick_replies {
                    check_len("quick-reply payload", q, QUICK_REPLY_PAYLOAD_MAX)?;
                }
                // The payload is all a tap brings back: two equal ones could not be told apart.
                check_unique("quick-reply payload", quick_replies.iter().map(String::as_str))
            }
            Self::QrImage { payload, caption } => {
                // How much fits is the renderer's to say, at send time.
                check_present("QR code payload", payload)?;
                check_caption(caption.as_deref())
            }
            Self::Location { latitude, longitude, name, address } => {
                check_degrees("latitude", latitude, 90.0)?;
                check_degrees("longitude", longitude, 180.0)?;
                if let Some(name) = name {
                    check_len("location name", name, TEXT_BODY_MAX)?;
                }
                address.as_deref().map_or(Ok(()), |a| check_len("location address", a, TEXT_BODY_MAX))
            }
            Self::OrderDetails {
                reference_id,
                body,
                footer,
                amount,
                description,
                copia_e_cola,
                merchant_name,
                pix_key,
                key_type,
                fallback,
            } => {
                check_reference_id(reference_id)?;
                check_len("body", body, INTERACTIVE_BODY_MAX)?;
                if let Some(f) = footer {
                    check_len("footer", f, FOOTER_MAX)?;
                }
                if amount.0 <= 0 {
                    return malformed("amount", &amount.0.to_string(), "a positive number of cents");
                }
                check_present("item description", description)?;
                check_present("Pix copia e cola", copia_e_cola)?;
                check_present("merchant name", merchant_name)?;
                check_present("Pix key", pix_key)?;
                if !PIX_KEY_TYPES.contains(&key_type.as_str()) {
                    return malformed("Pix key type", key_type, "one of CPF, CNPJ, EMAIL, PHONE, EVP");
                }
                check_len("fallback text", fallback, TEXT_BODY_MAX)
            }
            Self::OrderStatus { reference_id, status, body } => {
                check_reference_id(reference_id)?;
                if !ORDER_STATUSES.contains(&status.as_str()) {
                    return malformed(
                        "order status",
                        status,
                        "one of pending, processing, partially_shipped, shipped, completed, canceled",
                    );
                }
                check_len("body", body, INTERACTIVE_BODY_MAX)
            }
        }
    }
}
