//! The declarative tenant file. Parsing checks everything a running server would otherwise
//! discover later (time zone, phone numbers, slug) and reports the line and the reason.

use std::collections::BTreeSet;

use chrono_tz::Tz;
use serde::Deserialize;
use toml::Spanned;

use crate::config::Secret;
use crate::domain::PhoneE164;

/// A validated tenant file.
#[derive(Debug, Clone)]
pub struct TenantSpec {
    pub slug: String,
    pub name: String,
    pub timezone: Tz,
    pub phone_number_id: String,
    pub access_token: Option<Secret>,
    /// Numbers allowed to confirm merchant actions.
    pub staff: BTreeSet<PhoneE164>,
}

#[derive(Debug, thiserror::Error)]
pub enum TenantFileError {
    #[error("{0}")]
    Syntax(String),
    #[error("line {line}: {reason}")]
    Invalid { line: usize, reason: String },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    name: Spanned<String>,
    slug: Spanned<String>,
    timezone: Spanned<String>,
    whatsapp: RawWhatsApp,
    #[serde(default)]
    staff: Vec<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWhatsApp {
    phone_number_id: Spanned<String>,
    access_token: Option<String>,
}

impl TenantSpec {
    pub fn parse(text: &str) -> Result<Self, TenantFileError> {
        let raw: RawFile = toml::from_str(text).map_err(|e| TenantFileError::Syntax(e.to_string()))?;
        let invalid = |span: std::ops::Range<usize>, reason: String| TenantFileError::Invalid {
            line: line_of(text, span.start),
            reason,
        };

        let name = raw.name.get_ref().trim().to_owned();
        if name.is_empty() {
            return Err(invalid(raw.name.span(), "name must not be empty".into()));
        }
        let slug = raw.slug.get_ref().clone();
        let slug_ok = !slug.is_empty()
            && slug.len() <= 64
            && slug.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !slug.starts_with('-');
        if !slug_ok {
            return Err(invalid(
                raw.slug.span(),
                format!("slug {slug:?} must be 1-64 lowercase letters, digits or '-'"),
            ));
        }
        let timezone: Tz = raw.timezone.get_ref().parse().map_err(|_| {
            invalid(
                raw.timezone.span(),
                format!("timezone {:?} is not an IANA time zone such as America/Sao_Paulo", raw.timezone.get_ref()),
            )
        })?;
        let phone_number_id = raw.whatsapp.phone_number_id.get_ref().clone();
        if phone_number_id.is_empty() || !phone_number_id.bytes().all(|b| b.is_ascii_digit()) {
            return Err(invalid(
                raw.whatsapp.phone_number_id.span(),
                format!(
                    "whatsapp.phone_number_id {phone_number_id:?} must be the numeric id Meta shows for the number"
                ),
            ));
        }
        let mut staff = BTreeSet::new();
        for entry in &raw.staff {
            let phone = PhoneE164::parse(entry.get_ref()).map_err(|e| invalid(entry.span(), format!("staff: {e}")))?;
            staff.insert(phone);
        }
        Ok(Self {
            slug,
            name,
            timezone,
            phone_number_id,
            access_token: raw.whatsapp.access_token.filter(|t| !t.trim().is_empty()).map(Secret::new),
            staff,
        })
    }
}

fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes().iter().take(offset).filter(|&&b| b == b'\n').count() + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
name = "Barbearia do Zé"
slug = "barbearia-do-ze"
timezone = "America/Sao_Paulo"
staff = ["+5511988887777"]

[whatsapp]
phone_number_id = "106540352242922"
"#;

    #[test]
    fn parses_the_example_shape() {
        let spec = TenantSpec::parse(GOOD).unwrap();
        assert_eq!(spec.slug, "barbearia-do-ze");
        assert_eq!(spec.timezone, chrono_tz::America::Sao_Paulo);
        assert_eq!(spec.staff.len(), 1);
        assert!(spec.access_token.is_none());
    }

    #[test]
    fn the_committed_example_file_parses() {
        let text = include_str!("../../tenants/example.toml");
        TenantSpec::parse(text).unwrap();
    }

    #[test]
    fn reports_line_and_reason() {
        let bad = GOOD.replace("America/Sao_Paulo", "America/Atlantis");
        let err = TenantSpec::parse(&bad).unwrap_err().to_string();
        assert!(err.starts_with("line 4:"), "{err}");
        assert!(err.contains("America/Atlantis"), "{err}");

        let bad = GOOD.replace("+5511988887777", "11 98888-7777");
        let err = TenantSpec::parse(&bad).unwrap_err().to_string();
        assert!(err.starts_with("line 5: staff:"), "{err}");

        let err = TenantSpec::parse("name = \"x\"\nslug = \n").unwrap_err().to_string();
        assert!(err.contains("line 2"), "{err}");

        let bad = GOOD.replace("staff", "staf");
        assert!(TenantSpec::parse(&bad).unwrap_err().to_string().contains("staf"));
    }
}
