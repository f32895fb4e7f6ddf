//! E.164 phone numbers: `+` followed by 8 to 15 digits, the first not zero.

use std::fmt;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct PhoneE164(String);

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PhoneError {
    #[error("phone number {0:?} must contain only digits after an optional leading '+'")]
    NotDigits(String),
    #[error("phone number {0:?} must have 8 to 15 digits (E.164)")]
    Length(String),
    #[error("phone number {0:?} cannot start with 0 (E.164 starts with the country code)")]
    LeadingZero(String),
}

impl PhoneE164 {
    /// Accepts `+5511999990000` and WhatsApp's `5511999990000` (a `wa_id`), nothing else:
    /// spaces and dashes are rejected rather than guessed at, because a wrong digit reaches the
    /// wrong person.
    pub fn parse(raw: &str) -> Result<Self, PhoneError> {
        let digits = raw.strip_prefix('+').unwrap_or(raw);
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(PhoneError::NotDigits(raw.to_owned()));
        }
        if !(8..=15).contains(&digits.len()) {
            return Err(PhoneError::Length(raw.to_owned()));
        }
        if digits.starts_with('0') {
            return Err(PhoneError::LeadingZero(raw.to_owned()));
        }
        Ok(Self(format!("+{digits}")))
    }

    /// With the leading `+`.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Without the `+`, as WhatsApp writes a `wa_id`.
    pub fn digits(&self) -> &str {
        &self.0[1..]
    }
}

impl fmt::Display for PhoneE164 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for PhoneE164 {
    type Error = PhoneError;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        Self::parse(&value)
    }
}

impl From<PhoneE164> for String {
    fn from(value: PhoneE164) -> Self {
        value.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_plus_and_wa_id_forms() {
        assert_eq!(PhoneE164::parse("+5511999990000").unwrap().as_str(), "+5511999990000");
        let wa = PhoneE164::parse("16505551234").unwrap();
        assert_eq!(wa.as_str(), "+16505551234");
        assert_eq!(wa.digits(), "16505551234");
    }

    #[test]
    fn rejects_what_it_would_have_to_guess() {
        assert!(matches!(PhoneE164::parse("+55 11 99999-0000"), Err(PhoneError::NotDigits(_))));
        assert!(matches!(PhoneE164::parse(""), Err(PhoneError::NotDigits(_))));
        assert!(matches!(PhoneE164::parse("+"), Err(PhoneError::NotDigits(_))));
        assert!(matches!(PhoneE164::parse("1234567"), Err(PhoneError::Length(_))));
        assert!(matches!(PhoneE164::parse("1234567890123456"), Err(PhoneError::Length(_))));
        assert!(matches!(PhoneE164::parse("05511999990000"), Err(PhoneError::LeadingZero(_))));
    }
}
