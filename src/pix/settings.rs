//! A tenant's Pix settings, as its tenant file declares them.
//!
//! Invariants of a [`PixSettings`]: the key was checked for its declared type, and the
//! merchant name and city keep at least one character once folded to ASCII, so every static
//! BR Code built from them is valid. The tenant-file parser calls [`PixSettings::from_raw`]
//! and reports its message with the file's line.

use std::fmt;
use std::ops::RangeInclusive;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::fold::fold_ascii;
use super::key::{PixKey, PixKeyType};
use super::mercadopago::payer::PayerEmail;

/// Who creates the charges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GatewayKind {
    /// Static BR Codes built locally; nothing leaves the server.
    Sandbox,
    /// The Banco Central's API Pix standard (Efí, Inter, Itaú, Sicredi…): OAuth2 with mutual TLS.
    Bacen,
    Asaas,
    MercadoPago,
}

impl GatewayKind {
    pub fn parse(raw: &str) -> Result<Self, String> {
        match raw.trim().to_ascii_lowercase().as_str() {
            "sandbox" => Ok(Self::Sandbox),
            "bacen" => Ok(Self::Bacen),
            "asaas" => Ok(Self::Asaas),
            "mercadopago" => Ok(Self::MercadoPago),
            _ => Err(format!("unknown gateway {raw:?}; supported: sandbox, bacen, asaas, mercadopago")),
        }
    }

    /// Whether a charge needs the payer's CPF or CNPJ: Asaas refuses a payment for a customer
    /// without one on accounts that enforce it, so it is always asked for.
    pub fn requires_payer_document(self) -> bool {
        self == Self::Asaas
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Sandbox => "sandbox",
            Self::Bacen => "bacen",
            Self::Asaas => "asaas",
            Self::MercadoPago => "mercadopago",
        }
    }
}

/// How to reach a real provider. Secrets are never in the file: it names the environment
/// variables that hold them, read when the gateway is built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderConfig {
    /// The API's base URL (required for bacen; asaas and mercadopago have defaults).
    pub base_url: Option<String>,
    /// bacen: the OAuth2 token endpoint (default `{base_url}/oauth/token`).
    pub token_url: Option<String>,
    /// bacen: the OAuth2 client id.
    pub client_id: Option<String>,
    /// bacen: the variable holding the OAuth2 client secret.
    pub client_secret_env: Option<String>,
    /// bacen: the client certificate and key (PEM files) for mutual TLS, and optionally the
    /// CA that signs the provider's server certificate.
    pub cert_file: Option<String>,
    pub key_file: Option<String>,
    pub ca_file: Option<String>,
    /// bacen: the variable holding the per-tenant secret `txid`s are derived with.
    pub txid_secret_env: Option<String>,
    /// asaas: the variable holding the `access_token`; mercadopago: the access token.
    pub api_key_env: Option<String>,
    /// The variable holding what authenticates notifications: the Asaas webhook token, the
    /// Mercado Pago webhook secret, or the Bacen callback's secret path segment.
    pub webhook_secret_env: Option<String>,
    /// mercadopago: where the payer's required e-mail comes from.
    pub payer_email: Option<PayerEmail>,
    /// How long one request to the provider may take (each gateway has its default). A
    /// worker waits this long on a provider that hangs, and an attempt that takes over a
    /// charge from a frozen worker waits it out before its lookup (Asaas).
    pub timeout: Option<Duration>,
    /// How long after our request gave up a provider that does not deduplicate creates (Asaas)
    /// may still create the charge: an empty lookup is trusted only after it.
    pub lookup_margin: Duration,
}

impl Default for ProviderConfig {
    fn default() -> Self {
        Self {
            base_url: None,
            token_url: None,
            client_id: None,
            client_secret_env: None,
            cert_file: None,
            key_file: None,
            ca_file: None,
            txid_secret_env: None,
            api_key_env: None,
            webhook_secret_env: None,
            payer_email: None,
            timeout: None,
            lookup_margin: DEFAULT_LOOKUP_MARGIN,
        }
    }
}

/// `[pix] lookup_margin_seconds` when absent, and its bounds.
pub const DEFAULT_LOOKUP_MARGIN: Duration = Duration::from_secs(30);
const LOOKUP_MARGIN_SECONDS: RangeInclusive<u64> = 0..=600;

/// Bounds of `[pix] timeout_seconds`: long enough for a slow provider, short enough that a
/// hanging one does not hold a worker for minutes.
const TIMEOUT_SECONDS: RangeInclusive<u64> = 1..=60;

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
    pub provider: ProviderConfig,
}

/// The `[pix]` table of a tenant file, also how it is stored with the tenant (and checked
/// again, by [`PixSettings::from_raw`], when used).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPix {
    /// `sandbox` when absent.
    pub gateway: Option<String>,
    pub key: String,
    pub key_type: String,
    pub merchant_name: String,
    pub merchant_city: String,
    /// The API's base URL (required for bacen; asaas and mercadopago have defaults).
    #[serde(default)]
    pub base_url: Option<String>,
    /// bacen: the OAuth2 token endpoint (default `{base_url}/oauth/token`).
    #[serde(default)]
    pub token_url: Option<String>,
    /// bacen: the OAuth2 client id.
    #[serde(default)]
    pub client_id: Option<String>,
    /// bacen: the variable holding the OAuth2 client secret.
    #[serde(default)]
    pub client_secret_env: Option<String>,
    /// bacen: the client certificate and key (PEM files) for mutual TLS, and optionally the
    /// CA that signs the provider's server certificate.
    #[serde(default)]
    pub cert_file: Option<String>,
    #[serde(default)]
    pub key_file: Option<String>,
    #[serde(default)]
    pub ca_file: Option<String>,
    /// bacen: the variable holding the per-tenant secret `txid`s are derived with.
    #[serde(default)]
    pub txid_secret_env: Option<String>,
    /// asaas: the variable holding the `access_token`; mercadopago: the access token.
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// The variable holding what authenticates notifications: the Asaas webhook token, the
    /// Mercado Pago webhook secret, or the Bacen callback's secret path segment.
    #[serde(default)]
    pub webhook_secret_env: Option<String>,
    /// Seconds one request to the provider may take (1–60; default 20, 30 for bacen).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<u64>,
    /// mercadopago: the payer e-mail it requires, an address you own or `@domain` for
    /// `<phone digits>@domain` per customer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payer_email: Option<String>,
    /// asaas: seconds after a create we gave up on that Asaas may still make the payment
    /// (0–600; default 30). A lookup that finds nothing is trusted only after them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lookup_margin_seconds: Option<u64>,
}

impl RawPix {
    /// The gateway the table names (`sandbox` when it names none).
    pub fn gateway_kind(&self) -> Result<GatewayKind, String> {
        match self.gateway.as_deref() {
            Some(name) => GatewayKind::parse(name).map_err(|e| format!("gateway: {e}")),
            None => Ok(GatewayKind::Sandbox),
        }
    }

    /// Whether charges on this table's gateway need the payer's CPF or CNPJ.
    pub fn requires_payer_document(&self) -> bool {
        self.gateway_kind().is_ok_and(GatewayKind::requires_payer_document)
    }
}

impl PixSettings {
    pub fn from_raw(raw: RawPix) -> Result<Self, String> {
        let gateway = raw.gateway_kind()?;
        let kind = PixKeyType::parse(&raw.key_type).map_err(|e| format!("key_type: {e}"))?;
        let key = PixKey::parse(kind, &raw.key).map_err(|e| format!("key: {e}"))?;
        let merchant_name = checked_text("merchant_name", &raw.merchant_name)?;
        let merchant_city = checked_text("merchant_city", &raw.merchant_city)?;
        let timeout = match raw.timeout_seconds {
            Some(seconds) if TIMEOUT_SECONDS.contains(&seconds) => Some(Duration::from_secs(seconds)),
            Some(seconds) => {
                let (low, high) = (TIMEOUT_SECONDS.start(), TIMEOUT_SECONDS.end());
                return Err(format!("timeout_seconds: {seconds} is outside {low}–{high}"));
            }
            None => None,
        };
        let lookup_margin = match raw.lookup_margin_seconds {
            Some(seconds) if LOOKUP_MARGIN_SECONDS.contains(&seconds) => Duration::from_secs(seconds),
            Some(seconds) => {
                let (low, high) = (LOOKUP_MARGIN_SECONDS.start(), LOOKUP_MARGIN_SECONDS.end());
                return Err(format!("lookup_margin_seconds: {seconds} is outside {low}–{high}"));
            }
            None => DEFAULT_LOOKUP_MARGIN,
        };
        let payer_email =
            raw.payer_email.as_deref().map(PayerEmail::parse).transpose().map_err(|e| format!("payer_email: {e}"))?;
        let provider = ProviderConfig {
            base_url: raw.base_url,
            token_url: raw.token_url,
            client_id: raw.client_id,
            client_secret_env: raw.client_secret_env,
            cert_file: raw.cert_file,
            key_file: raw.key_file,
            ca_file: raw.ca_file,
            txid_secret_env: raw.txid_secret_env,
            api_key_env: raw.api_key_env,
            webhook_secret_env: raw.webhook_secret_env,
            payer_email,
            timeout,
            lookup_margin,
        };
        let required: &[(&str, &Option<String>)] = match gateway {
            GatewayKind::Sandbox => &[],
            GatewayKind::Bacen => &[
                ("base_url", &provider.base_url),
                ("client_id", &provider.client_id),
                ("client_secret_env", &provider.client_secret_env),
                ("cert_file", &provider.cert_file),
                ("key_file", &provider.key_file),
                ("txid_secret_env", &provider.txid_secret_env),
            ],
            GatewayKind::Asaas | GatewayKind::MercadoPago => &[("api_key_env", &provider.api_key_env)],
        };
        if let Some((field, _)) = required.iter().find(|(_, v)| v.as_deref().is_none_or(|v| v.trim().is_empty())) {
            return Err(format!("{field}: required for gateway {gateway}"));
        }
        Ok(Self { gateway, key, merchant_name, merchant_city, provider })
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
            ..Default::default()
        }
    }

    fn mercadopago(payer_email: Option<&str>) -> RawPix {
        let payer_email = payer_email.map(str::to_owned);
        RawPix { gateway: Some("mercadopago".into()), api_key_env: Some("MP".into()), payer_email, ..raw() }
    }

    #[test]
    fn reads_a_valid_table() {
        let settings = PixSettings::from_raw(raw()).unwrap();
        assert_eq!(settings.gateway, GatewayKind::Sandbox);
        assert_eq!((settings.key.kind(), settings.key.as_str()), (PixKeyType::Phone, "+5511999990000"));
        assert_eq!(settings.merchant_name, "Barbearia do Zé");
        let explicit = PixSettings::from_raw(RawPix { gateway: Some("SANDBOX".into()), ..raw() }).unwrap();
        assert_eq!(explicit.gateway, GatewayKind::Sandbox);
        let mp = PixSettings::from_raw(mercadopago(Some("@clientes.loja.com.br"))).unwrap();
        assert_eq!(mp.provider.payer_email, Some(PayerEmail::PerCustomer { domain: "clientes.loja.com.br".into() }));
    }

    #[test]
    fn reports_the_field_and_the_reason() {
        for (bad, expected) in [
            (RawPix { gateway: Some("efi".into()), ..raw() }, "unknown gateway \"efi\"; supported: sandbox"),
            (RawPix { key_type: "iban".into(), ..raw() }, "key_type: unknown Pix key type"),
            (RawPix { key_type: "cpf".into(), ..raw() }, "key: "),
            (RawPix { merchant_name: "☕ ".into(), ..raw() }, "merchant_name: "),
            (RawPix { merchant_city: "".into(), ..raw() }, "merchant_city: "),
            (RawPix { gateway: Some("bacen".into()), ..raw() }, "base_url: required for gateway bacen"),
            (RawPix { gateway: Some("asaas".into()), ..raw() }, "api_key_env: required for gateway asaas"),
            (mercadopago(Some("clientes.loja.com.br")), "payer_email: \"clientes.loja.com.br\" is not name@domain"),
            (RawPix { timeout_seconds: Some(0), ..raw() }, "timeout_seconds: 0 is outside 1–60"),
            (RawPix { timeout_seconds: Some(600), ..raw() }, "timeout_seconds: 600 is outside"),
            (RawPix { lookup_margin_seconds: Some(601), ..raw() }, "lookup_margin_seconds: 601 is outside 0–600"),
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
