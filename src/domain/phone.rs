//! E.164 phone numbers: `+` followed by 8 to 15 digits, the first not zero.
//!
//! One person, two spellings: WhatsApp reports many Brazilian mobiles without the ninth digit
//! (`wa_id` `551188887777` for `+55 11 98888-7777`), while people type it. [`PhoneE164::same_person`]
//! and [`PhoneE164::match_key`] compare numbers in one canonical form, so a customer stays one
//! contact and a staff number matches however it was written; the number itself is kept as
//! given, since the one WhatsApp reports is the one to send to.

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

    /// The digits numbers are compared by: a Brazilian mobile (`55`, a two-digit area code,
    /// `9` and eight digits starting 6 to 9, the mobiles that had eight digits before the ninth
    /// was added) without its ninth digit, so both spellings give the same key; every other
    /// number as it is (an eight-digit number starting 2 to 5 is a landline).
    pub fn match_key(&self) -> String {
        let digits = self.digits();
        let bytes = digits.as_bytes();
        let area_code = bytes.get(2..4).is_some_and(|a| a.iter().all(|b| (b'1'..=b'9').contains(b)));
        if bytes.len() == 13 && digits.starts_with("55") && area_code && bytes[4] == b'9' && bytes[5] >= b'6' {
            format!("{}{}", &digits[..4], &digits[5..])
        } else {
            digits.to_owned()
        }
    }

    /// The digits of every spelling of the number: itself, and for a Brazilian mobile the
    /// other one (with or without the ninth digit).
    pub fn spellings(&self) -> Vec<String> {
        let digits = self.digits().to_owned();
        let key = self.match_key();
        let other = if key != digits {
            key
        } else if digits.len() == 12 && digits.starts_with("55") && digits.as_bytes()[4] >= b'6' {
            // A mobile stored without its ninth digit (`match_key`'s own form): add it back.
            format!("{}9{}", &digits[..4], &digits[4..])
        } else {
            return vec![digits];
        };
        vec![digits, other]
    }

    /// Whether two numbers reach the same person (see [`PhoneE164::match_key`]).
    pub fn same_person(&self, other: &PhoneE164) -> bool {
        self == other || self.match_key() == other.match_key()
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
    fn brazilian_mobiles_match_with_or_without_the_ninth_digit() {
        let typed = PhoneE164::parse("+5511988887777").unwrap();
        let reported = PhoneE164::parse("551188887777").unwrap();
        assert_eq!(typed.match_key(), "551188887777");
        assert_eq!(reported.match_key(), "551188887777");
        assert!(typed.same_person(&reported) && reported.same_person(&typed));
        assert_eq!(typed.as_str(), "+5511988887777", "the number itself is kept as given");
        // Another mobile, a landline, a foreign number with 13 digits, an area code with a 0.
        for (a, b) in [
            ("+5511988887777", "+5511988887778"),
            ("+551133334444", "+5511933334444"),
            ("+5521988887777", "+551188887777"),
        ] {
            assert!(!PhoneE164::parse(a).unwrap().same_person(&PhoneE164::parse(b).unwrap()), "{a} {b}");
        }
        for unchanged in ["+551133334444", "+4915123456789", "+5501988887777", "+16505551234"] {
            let phone = PhoneE164::parse(unchanged).unwrap();
            assert_eq!(phone.match_key(), phone.digits(), "{unchanged}");
        }
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
