//! A tenant's Pix settings, as its tenant file declares them.
//!
//! Invariants of a [`PixSettings`]: the key was checked for its declared type, and the
//! merchant name and city keep at least one character once folded to ASCII, so every static
//! BR Code built from them is valid. The tenant-file parser calls [`PixSettings::from_raw`]
//! and reports its message with the file's line.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::fold::fold_ascii;
use super::key::{PixKey, PixKeyType};

/// Who creates the charges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GatewayKind {
    /// Static BR Codes built locally; nothing leaves the server.
    Sandbox,
}

impl GatewayKind {
    pub fn parse(raw: &str) -> Result<Self, String> {
        match raw.trim().to_ascii_lowercase().as_str() {
            "sandbox" => Ok(Self::Sandbox),
            _ => Err(format!("unknown gateway {raw:?}; supported: sandbox")),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Sandbox => "sandbox",
        }
    }
}

impl fmt::Display for GatewayKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PixSettings {
    pub gateway: GatewayKind,
    pub key: PixKey,
    /// As written in the tenant file; folded to ASCII and cut when a code is built.
    pub merchant_name: String,
    pub merchant_city: String,
}

/// The `[pix]` table of a tenant file, also how it is stored with the tenant (and checked
/// again, by [`PixSettings::from_raw`], when used).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPix {
    /// `sandbox` when absent.
    pub gateway: Option<String>,
    pub key: String,
    pub key_type: String,
    pub merchant_name: String,
    pub merchant_city: String,
}

impl PixSettings {
    pub fn from_raw(raw: RawPix) -> Result<Self, String> {
        let gateway = match raw.gateway.as_deref() {
            Some(name) => GatewayKind::parse(name).map_err(|e| format!("gateway: {e}"))?,
            None => GatewayKind::Sandbox,
        };
        let kind = PixKeyType::parse(&raw.key_type).map_err(|e| format!("key_type: {e}"))?;
        let key = PixKey::parse(kind, &raw.key).map_err(|e| format!("key: {e}"))?;
        let merchant_name = checked_text("merchant_name", &raw.merchant_name)?;
        let merchant_city = checked_text("merchant_city", &raw.merchant_city)?;
        Ok(Self { gateway, key, merchant_name, merchant_city })
    }
}

fn checked_text(field: &str, text: &str) -> Result<String, String> {
    if fold_ascii(text).is_empty() {
        return Err(format!("{field}: {text:?} has no letters or digits a Pix code can carry"));
    }
    Ok(text.trim().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw() -> RawPix {
        RawPix {
            gateway: None,
            key: "+55 11 99999-0000".into(),
            key_type: "Phone".into(),
            merchant_name: " Barbearia do Zé ".into(),
            merchant_city: "São Paulo".into(),
        }
    }

    #[test]
    fn reads_a_valid_table() {
        let settings = PixSettings::from_raw(raw()).unwrap();
        assert_eq!(settings.gateway, GatewayKind::Sandbox);
        assert_eq!((settings.key.kind(), settings.key.as_str()), (PixKeyType::Phone, "+5511999990000"));
        assert_eq!(settings.merchant_name, "Barbearia do Zé");
        let explicit = PixSettings::from_raw(RawPix { gateway: Some("SANDBOX".into()), ..raw() }).unwrap();
        assert_eq!(explicit.gateway, GatewayKind::Sandbox);
    }

    #[test]
    fn reports_the_field_and_the_reason() {
        for (bad, expected) in [
            (RawPix { gateway: Some("efi".into()), ..raw() }, "unknown gateway \"efi\"; supported: sandbox"),
            (RawPix { key_type: "iban".into(), ..raw() }, "key_type: unknown Pix key type"),
            (RawPix { key_type: "cpf".into(), ..raw() }, "key: "),
            (RawPix { merchant_name: "☕ ".into(), ..raw() }, "merchant_name: "),
            (RawPix { merchant_city: "".into(), ..raw() }, "merchant_city: "),
        ] {
            let message = PixSettings::from_raw(bad).unwrap_err();
            assert!(message.contains(expected), "{message:?} lacks {expected:?}");
        }
    }

    #[test]
    fn the_table_rejects_unknown_fields() {
        let table = "key = \"a@b.com\"\nkey_type = \"email\"\nmerchant_name = \"A\"\nmerchant_city = \"B\"\n";
        assert!(toml::from_str::<RawPix>(table).is_ok());
        let typo = format!("{table}merchant_nmae = \"A\"\n");
        assert!(toml::from_str::<RawPix>(&typo).unwrap_err().to_string().contains("merchant_nmae"));
    }
}
