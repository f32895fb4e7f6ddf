//! `balcao pix decode|encode`: BR Code tools for operators. They need neither a database nor
//! configuration, and build their whole output as text so tests can read it.

use std::fmt::Write;

use super::brcode::{self, BrCode, BrCodeError, Field, StaticCharge};
use super::key::{PixKey, PixKeyType};
use super::txid::Txid;
use crate::domain::Cents;

#[derive(Debug, Clone, clap::Subcommand)]
pub enum PixCommand {
    /// Check a "Pix copia e cola" payload and show its fields.
    Decode {
        /// The payload; surrounding whitespace is ignored.
        payload: String,
    },
    /// Build a static "Pix copia e cola" payload.
    Encode {
        /// The receiver's Pix key.
        #[arg(long)]
        key: String,
        /// cpf, cnpj, email, phone or evp.
        #[arg(long)]
        key_type: String,
        /// Merchant name (folded to ASCII, cut to 25).
        #[arg(long)]
        name: String,
        /// Merchant city (folded to ASCII, cut to 15).
        #[arg(long)]
        city: String,
        /// Amount in reais, like 12.34; the payer types it when absent.
        #[arg(long)]
        amount: Option<String>,
        /// Up to 25 letters and digits.
        #[arg(long)]
        txid: Option<String>,
        /// Shown to the payer when it fits.
        #[arg(long)]
        description: Option<String>,
    },
    /// Print the URL to register with a tenant's Pix provider for payment notifications
    /// (reads the tenant from the database; the server's public address from BALCAO_PUBLIC_URL).
    WebhookUrl {
        /// The tenant's slug.
        #[arg(long)]
        tenant: String,
    },
}

/// The notification URL of a tenant whose gateway is `provider`, served at `public_url`; Bacen's
/// carries the secret path segment (the provider appends `/pix` itself).
pub fn webhook_url(public_url: &str, slug: &str, provider: &str, path_secret: Option<&str>) -> String {
    let base = public_url.trim_end_matches('/');
    match path_secret {
        Some(secret) => format!("{base}/webhooks/pix/{slug}/{provider}/{secret}"),
        None => format!("{base}/webhooks/pix/{slug}/{provider}"),
    }
}

/// The text to print, or the reason to print on stderr before exiting with 1.
pub fn run(command: &PixCommand) -> Result<String, String> {
    match command {
        PixCommand::WebhookUrl { .. } => Err("webhook-url needs the database; run it through `balcao pix`".into()),
        PixCommand::Decode { payload } => decode_report(payload.trim()).map_err(|e| e.to_string()),
        PixCommand::Encode { key, key_type, name, city, amount, txid, description } => {
            let kind = PixKeyType::parse(key_type).map_err(|e| e.to_string())?;
            let charge = StaticCharge {
                key: PixKey::parse(kind, key).map_err(|e| e.to_string())?,
                merchant_name: name.clone(),
                merchant_city: city.clone(),
                amount: amount.as_deref().map(Cents::parse_decimal).transpose().map_err(|e| e.to_string())?,
                txid: txid.as_deref().map(Txid::parse).transpose().map_err(|e| e.to_string())?,
                description: description.clone(),
            };
            charge.encode().map(|payload| format!("{payload}\n")).map_err(|e| e.to_string())
        }
    }
}

/// The fields, nested and named, then the verdict.
pub fn decode_report(payload: &str) -> Result<String, BrCodeError> {
    let code = brcode::decode(payload)?;
    let mut out = String::new();
    for field in code.fields() {
        write_field(&mut out, None, field);
    }
    let _ = writeln!(out, "CRC OK ({})", code.crc());
    for warning in code.warnings() {
        let _ = writeln!(out, "Warning: {warning}");
    }
    let _ = writeln!(out, "Pix rules OK: {}", summary(&code));
    Ok(out)
}

fn write_field(out: &mut String, parent: Option<u8>, field: &Field) {
    let indent = if parent.is_some() { "    " } else { "" };
    let name = brcode::field_name(parent, field.id()).unwrap_or("(unnamed)");
    let head = format!("{indent}{:02} {:>2} {name}", field.id(), field.value().len());
    match field.children() {
        Some(children) => {
            let _ = writeln!(out, "{head}");
            children.iter().for_each(|child| write_field(out, Some(field.id()), child));
        }
        None => {
            let _ = writeln!(out, "{head}: {}", field.value());
        }
    }
}

fn summary(code: &BrCode) -> String {
    let kind = match (code.url(), code.key(), code.recurrence_url()) {
        (Some(url), _, None) => format!("dynamic code, URL {url}"),
        (Some(url), _, Some(rec)) => format!("dynamic code, URL {url}, Pix Automático recurrence {rec}"),
        (None, None, Some(rec)) => format!("Pix Automático code, recurrence {rec}"),
        (None, Some(key), _) => format!("static code, key {key} ({})", key.kind()),
        (None, None, None) => "no key".to_owned(),
    };
    let amount = code.amount().map_or_else(|| "no amount".to_owned(), |a| format!("amount {a}"));
    let txid = code.txid().map_or_else(|| "no txid".to_owned(), |t| format!("txid {t}"));
    format!("{kind}, {amount}, {txid}")
}

#[cfg(test)]
mod tests {
    use super::*;

    const V7: &str = "00020104141234567890123426580014BR.GOV.BCB.PIX0136123e4567-e12b-12d1-a456-42665544000027300012BR.COM.OUTRO011001234567895204000053039865406123.455802BR5917NOME DO RECEBEDOR6008BRASILIA61087007490062190515RP12345678-201980390012BR.COM.OUTRO01190123.ABCD.3456.WXYZ6304AD38";

    #[test]
    fn decode_shows_nested_named_fields_and_the_verdict() {
        let report = decode_report(V7).unwrap();
        for line in [
            "00  2 Payload Format Indicator: 01\n",
            "26 58 Merchant Account Information\n",
            "    00 14 Globally Unique Identifier: BR.GOV.BCB.PIX\n",
            "    01 36 Pix Key: 123e4567-e12b-12d1-a456-426655440000\n",
            "54  6 Transaction Amount: 123.45\n",
            "    05 15 Reference Label (txid): RP12345678-2019\n",
            "80 39 Unreserved Template\n",
            "63  4 CRC16: AD38\n",
            "CRC OK (AD38)\n",
            "Pix rules OK: static code, key 123e4567-e12b-12d1-a456-426655440000 (evp), amount R$ 123,45, \
             txid RP12345678-2019\n",
        ] {
            assert!(report.contains(line), "{line:?} not in\n{report}");
        }
    }

    #[test]
    fn decode_trims_and_reports_the_reason() {
        let wrong = V7.replace("AD38", "AD39");
        let err = run(&PixCommand::Decode { payload: wrong }).unwrap_err();
        assert_eq!(err, "wrong CRC: the payload says AD39, the correct CRC is AD38");
        assert!(run(&PixCommand::Decode { payload: format!(" {V7}\n") }).is_ok());
    }

    #[test]
    fn encode_builds_a_payload_that_decodes() {
        let command = PixCommand::Encode {
            key: "thalesog@me.com".into(),
            key_type: "EMAIL".into(),
            name: "Thales Ogliari".into(),
            city: "São Miguel do Ó".into(),
            amount: Some("10,00".into()),
            txid: None,
            description: Some("Pedido 123".into()),
        };
        let payload = run(&command).unwrap();
        assert_eq!(
            payload,
            "00020126510014br.gov.bcb.pix0115thalesog@me.com0210Pedido 123520400005303986540510.005802BR\
             5914THALES OGLIARI6015SAO MIGUEL DO O62070503***63040DC6\n"
        );
        let PixCommand::Encode { key, key_type, name, city, description, .. } = command else { unreachable!() };
        let bad_txid =
            PixCommand::Encode { key, key_type, name, city, amount: None, txid: Some("pedido-1".into()), description };
        assert!(run(&bad_txid).unwrap_err().contains("letters and digits"));
    }
}
