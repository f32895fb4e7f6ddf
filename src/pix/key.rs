//! Pix keys ("chaves" of the DICT directory).
//!
//! Invariants of a [`PixKey`]: its text is the canonical form the directory holds, so it can
//! be written into a BR Code as is:
//! - `cpf`: 11 digits whose two check digits match;
//! - `cnpj`: 14 characters, 12 of `[0-9A-Z]` (CNPJs become alphanumeric in 2026) and two
//!   check digits that match;
//! - `email`: one `@`, a dotted domain, printable ASCII without spaces, at most 77 characters;
//! - `phone`: `+55`, a two-digit area code not starting with 0, then 8 or 9 digits;
//! - `evp`: a random key, a lowercase hyphenated UUID.
//!
//! [`PixKey::parse`] accepts the usual punctuation of a CPF, CNPJ or phone number and an
//! uppercase UUID, and stores the canonical form; [`PixKey::infer`] reads a key found inside a
//! BR Code, where only the canonical form is accepted.

use std::fmt;
use std::str::FromStr;

/// The longest key the directory holds (an e-mail); Bacen's `chave` has `maxLength: 77`.
pub const MAX_KEY_LEN: usize = 77;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PixKeyType {
    Cpf,
    Cnpj,
    Email,
    Phone,
    Evp,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PixKeyError {
    #[error("unknown Pix key type {0:?}; expected cpf, cnpj, email, phone or evp")]
    UnknownType(String),
    #[error("{raw:?} is not a valid {kind} Pix key: {reason}")]
    Invalid { kind: PixKeyType, raw: String, reason: &'static str },
    #[error("{0:?} is not a Pix key (not a CPF, CNPJ, e-mail, +55 phone or lowercase UUID)")]
    Unrecognized(String),
}

impl PixKeyType {
    pub const ALL: [PixKeyType; 5] = [Self::Cpf, Self::Cnpj, Self::Email, Self::Phone, Self::Evp];

    /// Case-insensitive: `cpf`, `CNPJ`, `Email`, `phone`, `evp`.
    pub fn parse(raw: &str) -> Result<Self, PixKeyError> {
        let wanted = raw.trim();
        Self::ALL
            .into_iter()
            .find(|kind| kind.as_str().eq_ignore_ascii_case(wanted))
            .ok_or_else(|| PixKeyError::UnknownType(raw.to_owned()))
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Cpf => "cpf",
            Self::Cnpj => "cnpj",
            Self::Email => "email",
            Self::Phone => "phone",
            Self::Evp => "evp",
        }
    }
}

impl fmt::Display for PixKeyType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for PixKeyType {
    type Err = PixKeyError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

/// A checked Pix key in canonical form.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PixKey {
    kind: PixKeyType,
    value: String,
}

impl PixKey {
    /// Checks `raw` as a key of type `kind` and keeps its canonical form.
    pub fn parse(kind: PixKeyType, raw: &str) -> Result<Self, PixKeyError> {
        let invalid = |reason| PixKeyError::Invalid { kind, raw: raw.to_owned(), reason };
        let trimmed = raw.trim();
        let value = match kind {
            PixKeyType::Cpf => {
                let digits = strip(trimmed, &['.', '-', ' ']);
                check_document(&digits, 11).map_err(invalid)?;
                digits
            }
            PixKeyType::Cnpj => {
                let chars = strip(trimmed, &['.', '-', '/', ' ']).to_ascii_uppercase();
                check_document(&chars, 14).map_err(invalid)?;
                chars
            }
            PixKeyType::Email => {
                check_email(trimmed).map_err(invalid)?;
                trimmed.to_owned()
            }
            PixKeyType::Phone => {
                let phone = strip(trimmed, &[' ', '-', '(', ')']);
                check_phone(&phone).map_err(invalid)?;
                phone
            }
            PixKeyType::Evp => {
                let uuid = trimmed.to_ascii_lowercase();
                check_evp(&uuid).map_err(invalid)?;
                uuid
            }
        };
        Ok(Self { kind, value })
    }

    /// Reads a key as written in a BR Code, telling its type from its shape. Only canonical
    /// forms are accepted: a payer's bank looks the text up in the directory as it is.
    pub fn infer(raw: &str) -> Result<Self, PixKeyError> {
        let bytes = raw.as_bytes();
        let all_digits = !bytes.is_empty() && bytes.iter().all(u8::is_ascii_digit);
        let kind = if raw.starts_with('+') {
            PixKeyType::Phone
        } else if raw.contains('@') {
            PixKeyType::Email
        } else if all_digits && bytes.len() == 11 {
            PixKeyType::Cpf
        } else if bytes.len() == 14 {
            PixKeyType::Cnpj
        } else if bytes.len() == 36 {
            PixKeyType::Evp
        } else {
            return Err(PixKeyError::Unrecognized(raw.to_owned()));
        };
        let key = Self::parse(kind, raw)?;
        if key.value != raw {
            return Err(PixKeyError::Invalid { kind, raw: raw.to_owned(), reason: "not in canonical form" });
        }
        Ok(key)
    }

    pub fn kind(&self) -> PixKeyType {
        self.kind
    }

    pub fn as_str(&self) -> &str {
        &self.value
    }
}

impl fmt::Display for PixKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.value)
    }
}

fn strip(raw: &str, separators: &[char]) -> String {
    raw.chars().filter(|c| !separators.contains(c)).collect()
}

/// CPF (11) and CNPJ (14): the base, then two mod-11 check digits. Each character counts as
/// its ASCII code minus 48, which is the digit itself for digits and the rule the Receita
/// Federal published for alphanumeric CNPJs.
fn check_document(text: &str, len: usize) -> Result<(), &'static str> {
    let bytes = text.as_bytes();
    if bytes.len() != len {
        return Err(if len == 11 { "a CPF has 11 digits" } else { "a CNPJ has 14 characters" });
    }
    let (base, check) = bytes.split_at(len - 2);
    let base_ok = if len == 11 {
        base.iter().all(u8::is_ascii_digit)
    } else {
        base.iter().all(|b| b.is_ascii_digit() || b.is_ascii_uppercase())
    };
    if !base_ok || !check.iter().all(u8::is_ascii_digit) {
        return Err("unexpected character");
    }
    if len == 11 && base.iter().all(|b| *b == base[0]) {
        return Err("a CPF of one repeated digit is not valid");
    }
    let values: Vec<u32> = bytes.iter().map(|b| u32::from(*b) - u32::from(b'0')).collect();
    for position in [len - 2, len - 1] {
        let expected = check_digit(&values[..position], len == 11);
        if values[position] != expected {
            return Err("check digits do not match");
        }
    }
    Ok(())
}

fn check_digit(values: &[u32], cpf: bool) -> u32 {
    let sum: u32 = values
        .iter()
        .rev()
        .enumerate()
        .map(|(i, v)| {
            // CPF weights grow 2, 3, 4, … from the right; CNPJ weights cycle 2..=9.
            let weight = if cpf { i as u32 + 2 } else { (i as u32 % 8) + 2 };
            v * weight
        })
        .sum();
    match sum % 11 {
        0 | 1 => 0,
        r => 11 - r,
    }
}

fn check_email(text: &str) -> Result<(), &'static str> {
    if text.len() > MAX_KEY_LEN {
        return Err("an e-mail key has at most 77 characters");
    }
    if !text.bytes().all(|b| b.is_ascii_graphic()) {
        return Err("only printable ASCII without spaces");
    }
    let Some((local, domain)) = text.split_once('@') else {
        return Err("missing @");
    };
    if local.is_empty() || domain.contains('@') {
        return Err("exactly one @ after a non-empty name");
    }
    let labels_ok = domain.split('.').all(|label| !label.is_empty());
    if !domain.contains('.') || !labels_ok {
        return Err("the domain must look like example.com");
    }
    Ok(())
}

fn check_phone(text: &str) -> Result<(), &'static str> {
    let Some(national) = text.strip_prefix("+55") else {
        return Err("a phone key starts with +55");
    };
    if !national.bytes().all(|b| b.is_ascii_digit()) || !(10..=11).contains(&national.len()) {
        return Err("+55, a two-digit area code and an 8 or 9 digit number");
    }
    if national.starts_with('0') {
        return Err("area codes do not start with 0");
    }
    Ok(())
}

fn check_evp(text: &str) -> Result<(), &'static str> {
    let groups: Vec<&str> = text.split('-').collect();
    let shape_ok = groups.len() == 5
        && groups.iter().zip([8, 4, 4, 4, 12]).all(|(group, len)| {
            group.len() == len && group.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        });
    if shape_ok { Ok(()) } else { Err("a random key is a UUID like 123e4567-e89b-12d3-a456-426614174000") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_types_parse_case_insensitively() {
        assert_eq!(PixKeyType::parse("CPF"), Ok(PixKeyType::Cpf));
        assert_eq!(PixKeyType::parse(" Email "), Ok(PixKeyType::Email));
        assert_eq!("evp".parse::<PixKeyType>(), Ok(PixKeyType::Evp));
        let err = PixKeyType::parse("pix").unwrap_err().to_string();
        assert!(err.contains("\"pix\"") && err.contains("cpf, cnpj, email, phone or evp"), "{err}");
    }

    #[test]
    fn cpf_and_cnpj_check_digits() {
        assert_eq!(PixKey::parse(PixKeyType::Cpf, "529.982.247-25").unwrap().as_str(), "52998224725");
        assert_eq!(PixKey::parse(PixKeyType::Cpf, "00205104118").unwrap().as_str(), "00205104118");
        for bad in ["52998224724", "5299822472", "11111111111", "5299822472a"] {
            assert!(PixKey::parse(PixKeyType::Cpf, bad).is_err(), "{bad}");
        }
        assert_eq!(PixKey::parse(PixKeyType::Cnpj, "11.222.333/0001-81").unwrap().as_str(), "11222333000181");
        assert!(PixKey::parse(PixKeyType::Cnpj, "11222333000180").is_err());
        // The Receita Federal's alphanumeric example.
        assert_eq!(PixKey::parse(PixKeyType::Cnpj, "12.ABC.345/01DE-35").unwrap().as_str(), "12ABC34501DE35");
        assert!(PixKey::parse(PixKeyType::Cnpj, "12ABC34501DE36").is_err());
    }

    #[test]
    fn email_phone_and_evp() {
        assert!(PixKey::parse(PixKeyType::Email, "thalesog@me.com").is_ok());
        let long = format!("{}@example.com", "a".repeat(MAX_KEY_LEN - 11));
        assert_eq!(long.len(), MAX_KEY_LEN + 1);
        for bad in ["no-at.com", "@x.com", "a@b", "a b@x.com", "a@@x.com", "a@x..com", long.as_str()] {
            assert!(PixKey::parse(PixKeyType::Email, bad).is_err(), "{bad}");
        }
        assert_eq!(PixKey::parse(PixKeyType::Phone, "+55 (61) 99999-9999").unwrap().as_str(), "+5561999999999");
        for bad in ["5561999999999", "+1415555267100", "+55619999", "+5501999999999"] {
            assert!(PixKey::parse(PixKeyType::Phone, bad).is_err(), "{bad}");
        }
        let evp = PixKey::parse(PixKeyType::Evp, "123E4567-E12B-12D1-A456-426655440000").unwrap();
        assert_eq!(evp.as_str(), "123e4567-e12b-12d1-a456-426655440000");
        assert!(PixKey::parse(PixKeyType::Evp, "123e4567e12b12d1a456426655440000").is_err());
    }

    #[test]
    fn infer_reads_canonical_keys_only() {
        for (raw, kind) in [
            ("123e4567-e12b-12d1-a456-426655440000", PixKeyType::Evp),
            ("thalesog@me.com", PixKeyType::Email),
            ("+5561999999999", PixKeyType::Phone),
            ("52998224725", PixKeyType::Cpf),
            ("11222333000181", PixKeyType::Cnpj),
        ] {
            assert_eq!(PixKey::infer(raw).map(|k| k.kind()), Ok(kind), "{raw}");
        }
        for bad in ["529.982.247-25", "123E4567-E12B-12D1-A456-426655440000", "+55 61 99999 9999", "hello", ""] {
            assert!(PixKey::infer(bad).is_err(), "{bad}");
        }
    }
}
