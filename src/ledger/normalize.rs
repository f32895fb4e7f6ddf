//! Typed normalization of tool arguments, so formatting never changes an idempotency key:
//! instants to UTC (to the minute), money to integer cents, ids to integers, phones to E.164,
//! text trimmed, NFKC, lowercased with inner spaces collapsed. Bump [`NORMALIZATION_VERSION`]
//! whenever a rule changes: the version is part of every key, so a new rule can never make an
//! old key match something else (or stop matching silently).

use chrono::{DateTime, NaiveDate, Utc};
use serde_json::Value;
use unicode_normalization::UnicodeNormalization;

use crate::domain::{Cents, PayerDocument, PhoneE164};

/// 2: free text is NFKC-normalized again after lowercasing (version 1 left `J` + caron as
/// `j` + caron, which normalizes to `ǰ`: its canonical form was not a fixed point).
pub const NORMALIZATION_VERSION: u32 = 2;

/// How a field is read and written back in canonical form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldKind {
    /// An instant with an explicit offset (RFC 3339, or `YYYY-MM-DD HH:MMZ`); canonical form
    /// `YYYY-MM-DDTHH:MMZ` in UTC.
    Instant,
    /// A calendar date `YYYY-MM-DD`.
    Date,
    /// Brazilian reais as a decimal (`"50"`, `"50.5"`, `"R$ 50,00"`, `50.5`), held as integer
    /// cents; canonical form the decimal string `"50.00"`.
    Money,
    /// A row id: a non-negative integer (or a string of digits).
    Id,
    /// A phone number; canonical form E.164.
    Phone,
    /// Free text; canonical form NFKC, trimmed, lowercased, inner whitespace collapsed.
    Text,
    /// Text a person will read (a charge's description): NFKC, trimmed, inner whitespace
    /// collapsed, case kept.
    Label,
    /// A CPF or CNPJ with valid check digits; canonical form compact and uppercase.
    Document,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct NormalizeError(pub String);

impl FieldKind {
    pub fn normalize(self, value: &Value) -> Result<Value, NormalizeError> {
        match self {
            Self::Instant => {
                let s = as_str(value, "a date-time string with an offset, like 2026-03-11T14:00:00-03:00")?;
                let at = parse_instant(s)?;
                Ok(Value::from(at.format("%Y-%m-%dT%H:%MZ").to_string()))
            }
            Self::Date => {
                let s = as_str(value, "a date string YYYY-MM-DD")?;
                let err = || NormalizeError(format!("{s:?} is not a date YYYY-MM-DD"));
                // Exactly YYYY-MM-DD: chrono alone would take signed, five-digit years.
                let t = s.trim();
                if t.len() != 10
                    || !t
                        .bytes()
                        .enumerate()
                        .all(|(i, b)| if i == 4 || i == 7 { b == b'-' } else { b.is_ascii_digit() })
                {
                    return Err(err());
                }
                let d = NaiveDate::parse_from_str(t, "%Y-%m-%d").map_err(|_| err())?;
                Ok(Value::from(d.format("%Y-%m-%d").to_string()))
            }
            Self::Money => Ok(Value::from(parse_cents(value)?.to_decimal())),
            Self::Id => match value {
                Value::Number(n) => n
                    .as_i64()
                    .filter(|v| *v >= 0)
                    .map(Value::from)
                    .ok_or_else(|| NormalizeError(format!("{n} is not a non-negative integer id"))),
                Value::String(s) if !s.trim().is_empty() && s.trim().bytes().all(|b| b.is_ascii_digit()) => s
                    .trim()
                    .parse::<i64>()
                    .map(Value::from)
                    .map_err(|_| NormalizeError(format!("{s:?} is too large for an id"))),
                other => Err(NormalizeError(format!("{other} is not an integer id"))),
            },
            Self::Phone => {
                let s = as_str(value, "a phone number in E.164, like +5511999990000")?;
                let compact: String = s.chars().filter(|c| !matches!(c, ' ' | '-' | '(' | ')' | '.')).collect();
                PhoneE164::parse(&compact).map(|p| Value::from(p.as_str())).map_err(|e| NormalizeError(e.to_string()))
            }
            Self::Text => {
                let s = as_str(value, "a string")?;
                Ok(Value::from(normalize_text(s)))
            }
            Self::Document => {
                let s = as_str(value, "a CPF (11 digits) or CNPJ (14 characters), like 529.982.247-25")?;
                PayerDocument::parse(s).map(|d| Value::from(d.as_str())).map_err(|e| NormalizeError(e.to_string()))
            }
            Self::Label => {
                let s = as_str(value, "a string")?;
                let nfkc: String = s.nfkc().collect();
                let label = nfkc.split_whitespace().collect::<Vec<_>>().join(" ");
                if label.is_empty() {
                    return Err(NormalizeError("must not be empty".into()));
                }
                Ok(Value::from(label))
            }
        }
    }

    /// The JSON Schema the model is shown for this kind.
    pub fn schema(self) -> Value {
        match self {
            Self::Instant => serde_json::json!({ "type": "string", "format": "date-time" }),
            Self::Date => serde_json::json!({ "type": "string", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$" }),
            Self::Money => serde_json::json!({ "type": "string", "pattern": "^[0-9]+([.,][0-9]{1,2})?$" }),
            Self::Id => serde_json::json!({ "type": "integer", "minimum": 0 }),
            Self::Phone | Self::Document | Self::Text | Self::Label => serde_json::json!({ "type": "string" }),
        }
    }
}

fn as_str<'a>(value: &'a Value, what: &str) -> Result<&'a str, NormalizeError> {
    value.as_str().ok_or_else(|| NormalizeError(format!("{value} is not {what}")))
}

/// NFKC, trimmed, lowercased, inner whitespace collapsed to one space, then NFKC again: a
/// lowercase letter may compose with the mark after it where its capital did not (`J` + caron
/// stays two characters, `j` + caron is `ǰ`), and the result must normalize to itself.
pub fn normalize_text(s: &str) -> String {
    let nfkc: String = s.nfkc().collect();
    nfkc.split_whitespace().collect::<Vec<_>>().join(" ").to_lowercase().nfkc().collect()
}

/// An instant that names its offset; truncated to the minute. A time without an offset is
/// refused rather than guessed, since a guess would move an appointment by hours.
pub fn parse_instant(raw: &str) -> Result<DateTime<Utc>, NormalizeError> {
    let err = || NormalizeError(format!("{raw:?} is not a date-time with an offset, like 2026-03-11T14:00:00-03:00"));
    if !raw.is_ascii() {
        return Err(err());
    }
    let mut s = raw.trim().replacen(' ', "T", 1);
    if s.ends_with(['Z', 'z']) {
        s.pop();
        s.push_str("+00:00");
    }
    // Offsets written +0300 or -03 become -03:00.
    let split = s.rfind(['+', '-']).filter(|i| *i > 10).ok_or_else(err)?;
    let (local, offset) = s.split_at(split);
    let offset = match offset.len() {
        3 => format!("{offset}:00"),
        5 if !offset.contains(':') => format!("{}:{}", &offset[..3], &offset[3..]),
        _ => offset.to_owned(),
    };
    // Seconds are optional.
    let local = if local.len() == 16 { format!("{local}:00") } else { local.to_owned() };
    let at = DateTime::parse_from_rfc3339(&format!("{local}{offset}")).map_err(|_| err())?.with_timezone(&Utc);
    Ok(at
        - chrono::TimeDelta::nanoseconds(at.timestamp_subsec_nanos().into())
        - chrono::TimeDelta::seconds(at.timestamp().rem_euclid(60)))
}

fn parse_cents(value: &Value) -> Result<Cents, NormalizeError> {
    let text = match value {
        Value::Number(n) => n.to_string(),
        Value::String(s) => s.clone(),
        other => return Err(NormalizeError(format!("{other} is not an amount in reais"))),
    };
    Cents::parse_decimal(&text).map_err(|e| NormalizeError(e.to_string()))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn instants_in_any_formatting_are_one_minute_in_utc() {
        let canonical = json!("2026-03-11T17:00Z");
        for raw in [
            "2026-03-11T14:00:00-03:00",
            "2026-03-11 17:00Z",
            "2026-03-11T17:00:00Z",
            "2026-03-11T17:00:59.999Z",
            "2026-03-11T13:00-04:00",
            "2026-03-11T15:00:00-0200",
            "2026-03-11T14:00-03",
        ] {
            assert_eq!(FieldKind::Instant.normalize(&json!(raw)).unwrap(), canonical, "{raw}");
        }
        for bad in
            ["2026-03-11T14:00:00", "amanhã às 14h", "2026-03-11", "", "2026-03-11T14:00+1é1", "2026-03-11T14:00+é"]
        {
            assert!(FieldKind::Instant.normalize(&json!(bad)).is_err(), "{bad}");
        }
        assert!(FieldKind::Instant.normalize(&json!(1_700_000_000)).is_err());
    }

    #[test]
    fn money_ids_phones_text() {
        for raw in [json!("50"), json!("50.00"), json!("50,00"), json!("R$ 50,00"), json!(50), json!(50.0)] {
            assert_eq!(FieldKind::Money.normalize(&raw).unwrap(), json!("50.00"), "{raw}");
        }
        assert!(FieldKind::Money.normalize(&json!("50.001")).is_err());
        assert!(FieldKind::Money.normalize(&json!("-5")).is_err());
        assert_eq!(FieldKind::Id.normalize(&json!("42")).unwrap(), json!(42));
        assert_eq!(FieldKind::Id.normalize(&json!(42)).unwrap(), json!(42));
        assert!(FieldKind::Id.normalize(&json!(4.2)).is_err());
        assert!(FieldKind::Id.normalize(&json!(-1)).is_err());
        assert!(FieldKind::Date.normalize(&json!("+262143-12-31")).is_err());
        assert!(FieldKind::Date.normalize(&json!("2026-3-1")).is_err());
        assert_eq!(FieldKind::Date.normalize(&json!(" 2026-03-01 ")).unwrap(), json!("2026-03-01"));
        assert_eq!(FieldKind::Phone.normalize(&json!("+55 (11) 99999-0000")).unwrap(), json!("+5511999990000"));
        assert_eq!(FieldKind::Document.normalize(&json!("529.982.247-25")).unwrap(), json!("52998224725"));
        assert!(FieldKind::Document.normalize(&json!("529.982.247-24")).unwrap_err().0.contains("check digits"));
        assert_eq!(FieldKind::Text.normalize(&json!("  Corte   MASCULINO\u{00A0}")).unwrap(), json!("corte masculino"));
        // NFKC folds compatibility forms: fullwidth letters, ligatures.
        assert_eq!(normalize_text("ＣＯＲＴＥ ﬁno"), "corte fino");
    }

    #[test]
    fn normalization_is_idempotent() {
        for (kind, raw) in [
            (FieldKind::Instant, json!("2026-03-11T14:00:00-03:00")),
            (FieldKind::Money, json!("R$ 12,5")),
            (FieldKind::Id, json!("7")),
            (FieldKind::Phone, json!("+55 11 98888-7777")),
            (FieldKind::Text, json!(" Ａna  Maria ")),
            (FieldKind::Date, json!("2026-03-11")),
        ] {
            let once = kind.normalize(&raw).unwrap();
            assert_eq!(kind.normalize(&once).unwrap(), once, "{kind:?}");
        }
    }

    #[test]
    fn text_lowercased_into_a_composable_pair_is_composed() {
        // Version 1 failed the tool_input fuzz target: "J\u{30C}" gave "j\u{30C}", which gives "ǰ".
        for (raw, canonical) in [("J\u{30C}", "\u{1F0}"), ("W\u{30A}", "\u{1E98}"), ("ȷ T\u{308}", "ȷ \u{1E97}")] {
            let once = normalize_text(raw);
            assert_eq!(once, canonical, "{raw:?}");
            assert_eq!(normalize_text(&once), once, "{raw:?}");
            assert_eq!(normalize_text(canonical), once, "{raw:?} and {canonical:?} are one text");
        }
    }
}
