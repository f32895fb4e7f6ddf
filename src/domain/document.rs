//! A payer's CPF or CNPJ, the document Brazilian Pix providers identify a payer by.
//!
//! Invariants of a [`PayerDocument`]: a CPF is 11 digits, a CNPJ 12 letters or digits and two
//! check digits (the alphanumeric CNPJ in force since July 2026, of which the all-digit CNPJ is
//! the special case), both with correct check digits and not one repeated digit; stored
//! compact and uppercase, shown with the usual punctuation. A person types it, so dots, dashes,
//! slashes and spaces are accepted and dropped; nothing else is guessed.

use std::fmt;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DocumentKind {
    Cpf,
    Cnpj,
}

impl DocumentKind {
    /// As providers name it (`CPF`, `CNPJ`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Cpf => "CPF",
            Self::Cnpj => "CNPJ",
        }
    }
}

#[derive(Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct PayerDocument(String);

/// Why a text is no CPF or CNPJ. It never carries the text: a document is personal data, and
/// errors reach logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DocumentError {
    #[error("not a CPF (11 digits) or a CNPJ (14 characters)")]
    Shape,
    #[error("the CPF or CNPJ has wrong check digits")]
    CheckDigits,
}

/// A character's value in the check-digit sums: its ASCII code minus 48 (`0`–`9` are 0–9,
/// `A` is 17, `Z` is 42), as the Receita Federal defines it for the alphanumeric CNPJ.
fn value(c: u8) -> u32 {
    u32::from(c) - u32::from(b'0')
}

/// The modulo-11 check digit of `chars` weighted by `weights`.
fn check_digit(chars: &[u8], weights: &[u32]) -> u8 {
    let sum: u32 = chars.iter().zip(weights).map(|(c, w)| value(*c) * w).sum();
    let rest = sum % 11;
    if rest < 2 { b'0' } else { b'0' + (11 - rest) as u8 }
}

impl PayerDocument {
    pub fn parse(raw: &str) -> Result<Self, DocumentError> {
        let compact: String = raw
            .trim()
            .chars()
            .filter(|c| !matches!(c, '.' | '-' | '/' | ' '))
            .map(|c| c.to_ascii_uppercase())
            .collect();
        let bytes = compact.as_bytes();
        let shape = match bytes.len() {
            11 if bytes.iter().all(u8::is_ascii_digit) => DocumentKind::Cpf,
            14 if bytes[..12].iter().all(|b| b.is_ascii_digit() || b.is_ascii_uppercase())
                && bytes[12..].iter().all(u8::is_ascii_digit) =>
            {
                DocumentKind::Cnpj
            }
            _ => return Err(DocumentError::Shape),
        };
        if bytes.iter().all(|b| *b == bytes[0]) {
            return Err(DocumentError::CheckDigits);
        }
        let (first, second): (&[u32], &[u32]) = match shape {
            DocumentKind::Cpf => (&[10, 9, 8, 7, 6, 5, 4, 3, 2], &[11, 10, 9, 8, 7, 6, 5, 4, 3, 2]),
            DocumentKind::Cnpj => (&[5, 4, 3, 2, 9, 8, 7, 6, 5, 4, 3, 2], &[6, 5, 4, 3, 2, 9, 8, 7, 6, 5, 4, 3, 2]),
        };
        let n = bytes.len();
        if check_digit(&bytes[..n - 2], first) != bytes[n - 2] || check_digit(&bytes[..n - 1], second) != bytes[n - 1] {
            return Err(DocumentError::CheckDigits);
        }
        Ok(Self(compact))
    }

    /// The document a whole message is, if any: `529.982.247-25`, `CPF 52998224725`, `cnpj:
    /// 12.ABC.345/01DE-35`. A sentence around it is not read: a number typed for another
    /// reason must not be taken for one.
    pub fn from_message(body: &str) -> Option<Self> {
        let trimmed = body.trim().trim_end_matches(['.', '!']);
        let rest = ["cpf", "cnpj"]
            .iter()
            .find_map(|word| {
                let head = trimmed.get(..word.len())?;
                head.eq_ignore_ascii_case(word).then(|| &trimmed[word.len()..])
            })
            .unwrap_or(trimmed);
        Self::parse(rest.trim_start_matches([':', ' '])).ok()
    }

    pub fn kind(&self) -> DocumentKind {
        if self.0.len() == 11 { DocumentKind::Cpf } else { DocumentKind::Cnpj }
    }

    /// Compact: digits (and a CNPJ's letters) only, as providers take it.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// `529.982.247-25`, `12.ABC.345/01DE-35`.
impl fmt::Display for PayerDocument {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.0;
        match self.kind() {
            DocumentKind::Cpf => write!(f, "{}.{}.{}-{}", &s[..3], &s[3..6], &s[6..9], &s[9..]),
            DocumentKind::Cnpj => write!(f, "{}.{}.{}/{}-{}", &s[..2], &s[2..5], &s[5..8], &s[8..12], &s[12..]),
        }
    }
}

/// Personal data: its kind only, never the number.
impl fmt::Debug for PayerDocument {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PayerDocument({})", self.kind().as_str())
    }
}

impl TryFrom<String> for PayerDocument {
    type Error = DocumentError;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        Self::parse(&value)
    }
}

impl From<PayerDocument> for String {
    fn from(value: PayerDocument) -> Self {
        value.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_cpfs_and_cnpjs_as_people_type_them() {
        let cpf = PayerDocument::parse(" 529.982.247-25 ").unwrap();
        assert_eq!(
            (cpf.kind(), cpf.as_str(), cpf.to_string().as_str()),
            (DocumentKind::Cpf, "52998224725", "529.982.247-25")
        );
        let cnpj = PayerDocument::parse("11.222.333/0001-81").unwrap();
        assert_eq!((cnpj.kind(), cnpj.as_str()), (DocumentKind::Cnpj, "11222333000181"));
        assert_eq!(cnpj.to_string(), "11.222.333/0001-81");
    }

    #[test]
    fn reads_the_alphanumeric_cnpj() {
        // The Receita Federal's example of the format in force since July 2026.
        let cnpj = PayerDocument::parse("12.ABC.345/01DE-35").unwrap();
        assert_eq!((cnpj.kind(), cnpj.as_str()), (DocumentKind::Cnpj, "12ABC34501DE35"));
        assert_eq!(PayerDocument::parse("12abc34501de35").unwrap(), cnpj, "typed in lowercase");
        assert!(matches!(PayerDocument::parse("12ABC34501DE36"), Err(DocumentError::CheckDigits)));
        assert!(
            matches!(PayerDocument::parse("12ABC34501DEA5"), Err(DocumentError::Shape)),
            "letters only before the check digits"
        );
    }

    #[test]
    fn refuses_wrong_check_digits_repeated_digits_and_other_shapes() {
        for bad in ["529.982.247-24", "111.111.111-11", "00000000000000", "11.222.333/0001-82"] {
            assert!(matches!(PayerDocument::parse(bad), Err(DocumentError::CheckDigits)), "{bad}");
        }
        for bad in ["", "5299822472", "529982247251", "529,982,247-25", "CPF: 529.982.247-25"] {
            assert!(matches!(PayerDocument::parse(bad), Err(DocumentError::Shape)), "{bad}");
        }
    }

    #[test]
    fn a_whole_message_that_is_a_document() {
        for yes in ["529.982.247-25", " CPF 52998224725 ", "cpf: 529.982.247-25.", "CNPJ 12.ABC.345/01DE-35"] {
            assert!(PayerDocument::from_message(yes).is_some(), "{yes:?}");
        }
        for no in ["meu cpf é 529.982.247-25", "529.982.247-24", "11 99999-0000", "oi", "cpf", "çpf 52998224725"] {
            assert!(PayerDocument::from_message(no).is_none(), "{no:?}");
        }
    }

    #[test]
    fn debug_never_shows_the_number() {
        let cpf = PayerDocument::parse("52998224725").unwrap();
        assert_eq!(format!("{cpf:?}"), "PayerDocument(CPF)");
    }
}
