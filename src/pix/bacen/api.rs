//! The wire of the API Pix: the `cob` we send (`CobSolicitada`), the `cob` we read
//! (`CobGerada` / `CobCompleta`), the location's QR code, and what an error answer or a
//! failed connection means for the caller.
//!
//! Invariants: what we read is lenient (every field optional, unknown statuses reported, not
//! guessed), what we send follows the spec's limits (`expiracao` ≥ 1 s, `valor.original`
//! `\d{1,10}\.\d{2}`, `solicitacaoPagador` ≤ 140 characters, `devedor` only with its `nome`); the
//! provider's error text is kept, bounded, in the error the caller sees.

use std::error::Error as StdError;

use chrono::{DateTime, TimeDelta, Utc};
use reqwest::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::domain::{Cents, DocumentKind};
use crate::pix::gateway::{ChargeRequest, GatewayError, PaymentState};
use crate::pix::http::{StatusClass, status_class};
use crate::pix::txid::Txid;

/// The status a `PATCH /cob/{txid}` sets to withdraw a charge.
pub(super) const REMOVED_BY_RECEIVER: &str = "REMOVIDA_PELO_USUARIO_RECEBEDOR";

/// `solicitacaoPagador` has `maxLength: 140`.
const MAX_PAYER_REQUEST_CHARS: usize = 140;
/// `devedor.nome` has `maxLength: 200`.
const MAX_PAYER_NAME_CHARS: usize = 200;
/// An error body that is neither JSON shape is quoted up to this many characters.
const MAX_RAW_ERROR_CHARS: usize = 300;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct CobSolicitada<'a> {
    calendario: Calendario,
    valor: Valor,
    chave: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    devedor: Option<Devedor>,
    #[serde(skip_serializing_if = "Option::is_none")]
    solicitacao_pagador: Option<String>,
}

/// The payer, optional: `cpf` or `cnpj` (alphanumeric since 2.9.0), and `nome`, which the spec
/// requires with either.
#[derive(Serialize)]
struct Devedor {
    #[serde(skip_serializing_if = "Option::is_none")]
    cpf: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cnpj: Option<String>,
    nome: String,
}

#[derive(Serialize, Deserialize, Default)]
struct Calendario {
    #[serde(default, skip_serializing)]
    criacao: Option<String>,
    expiracao: Option<i64>,
}

#[derive(Serialize, Deserialize, Default)]
struct Valor {
    original: Option<String>,
}

/// The body of `PUT /cob/{txid}` for `req`, made at `now`.
pub(super) fn cob_request(chave: &str, req: &ChargeRequest, now: DateTime<Utc>) -> Value {
    let seconds = (req.expires_at - now).num_seconds().clamp(1, i64::from(i32::MAX));
    let description: String = req.description.trim().chars().take(MAX_PAYER_REQUEST_CHARS).collect();
    // Identified only with a name, which the spec requires beside the document.
    let devedor = match (&req.payer.document, req.payer.name.as_deref().map(str::trim).filter(|n| !n.is_empty())) {
        (Some(document), Some(name)) => {
            let number = Some(document.as_str().to_owned());
            let nome: String = name.chars().take(MAX_PAYER_NAME_CHARS).collect();
            Some(match document.kind() {
                DocumentKind::Cpf => Devedor { cpf: number, cnpj: None, nome },
                DocumentKind::Cnpj => Devedor { cpf: None, cnpj: number, nome },
            })
        }
        _ => None,
    };
    let body = CobSolicitada {
        calendario: Calendario { criacao: None, expiracao: Some(seconds) },
        valor: Valor { original: Some(req.amount.to_decimal()) },
        chave,
        devedor,
        solicitacao_pagador: Some(description.trim_end().to_owned()).filter(|d| !d.is_empty()),
    };
    // A struct of strings and numbers always serializes.
    serde_json::to_value(body).unwrap_or(Value::Null)
}

/// A charge as the provider answers it (`CobGerada`, `CobCompleta`).
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub(super) struct Cob {
    txid: Option<String>,
    #[serde(default)]
    calendario: Calendario,
    status: Option<String>,
    #[serde(default)]
    valor: Valor,
    loc: Option<Loc>,
    pix_copia_e_cola: Option<String>,
    #[serde(default)]
    pix: Vec<Received>,
}

#[derive(Deserialize)]
struct Loc {
    /// `int64` in the spec; some providers send a string.
    id: Option<Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Received {
    end_to_end_id: Option<String>,
}

/// A `2xx` whose body we cannot read: the charge may well exist.
fn unreadable(what: &str, e: impl std::fmt::Display) -> GatewayError {
    GatewayError::Unknown(format!("the provider's {what} is unreadable: {e}"))
}

pub(super) fn parse_cob(body: &[u8]) -> Result<Cob, GatewayError> {
    serde_json::from_slice(body).map_err(|e| unreadable("charge", e))
}

/// `GET /loc/{id}/qrcode` (Efí): `{"qrcode": "<copia e cola>", "imagemQrcode": "data:…"}`.
pub(super) fn parse_qrcode(body: &[u8]) -> Result<String, GatewayError> {
    #[derive(Deserialize)]
    struct QrCode {
        qrcode: Option<String>,
    }
    let parsed: QrCode = serde_json::from_slice(body).map_err(|e| unreadable("QR code", e))?;
    parsed
        .qrcode
        .filter(|q| !q.trim().is_empty())
        .ok_or_else(|| GatewayError::Rejected("the provider's location has no qrcode".into()))
}

impl Cob {
    pub(super) fn copia_e_cola(&self) -> Option<&str> {
        self.pix_copia_e_cola.as_deref().filter(|c| !c.trim().is_empty())
    }

    /// The location's id, if it is safe to put in a path.
    pub(super) fn loc_id(&self) -> Option<String> {
        let id = match self.loc.as_ref()?.id.as_ref()? {
            Value::Number(n) => n.to_string(),
            Value::String(s) => s.clone(),
            _ => return None,
        };
        Some(id).filter(|id| !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'))
    }

    /// `criacao + expiracao`, when the provider gives both.
    pub(super) fn expires_at(&self) -> Option<DateTime<Utc>> {
        let created = DateTime::parse_from_rfc3339(self.calendario.criacao.as_deref()?).ok()?;
        let seconds = self.calendario.expiracao?;
        created.with_timezone(&Utc).checked_add_signed(TimeDelta::try_seconds(seconds)?)
    }

    /// The charge under our txid must be the one we asked for: same txid, same amount.
    pub(super) fn check_matches(&self, txid: &Txid, amount: Cents) -> Result<(), GatewayError> {
        if let Some(theirs) = self.txid.as_deref()
            && theirs != txid.as_str()
        {
            return Err(GatewayError::Rejected(format!(
                "asked for charge {txid}, the provider answered with {theirs}"
            )));
        }
        match self.valor.original.as_deref() {
            Some(original) if Cents::parse_decimal(original).ok() != Some(amount) => {
                Err(GatewayError::Rejected(format!(
                    "txid {txid} already names a charge of {original} at the provider, not {}",
                    amount.to_decimal()
                )))
            }
            _ => Ok(()),
        }
    }

    /// The end-to-end id of the Pix that paid the charge (the first, when several did).
    pub(super) fn end_to_end_id(&self) -> Option<&str> {
        self.pix.first().and_then(|p| p.end_to_end_id.as_deref()).filter(|id| !id.is_empty())
    }

    /// The payment state at `now`. `status` is the record's, so an `ATIVA` charge past
    /// `criacao + expiracao` is expired.
    pub(super) fn payment_state(&self, now: DateTime<Utc>) -> Result<PaymentState, GatewayError> {
        match self.status.as_deref() {
            Some("ATIVA") if self.expires_at().is_some_and(|at| at <= now) => Ok(PaymentState::Expired),
            Some("ATIVA") => Ok(PaymentState::Pending),
            // Devoluções leave the charge CONCLUIDA: the money was received, refunds are
            // tracked on their own.
            Some("CONCLUIDA") => Ok(PaymentState::Paid { end_to_end_id: self.end_to_end_id().map(str::to_owned) }),
            Some(REMOVED_BY_RECEIVER | "REMOVIDA_PELO_PSP") => Ok(PaymentState::Cancelled),
            Some(other) => Err(GatewayError::Unknown(format!("the provider reports status {other:?}, unknown here"))),
            None => Err(GatewayError::Unknown("the provider's charge has no status".into())),
        }
    }
}

/// What an error answer means ([`status_class`]); the Bacen client follows no redirect, so one
/// points at a wrong `base_url` and is a refusal.
pub(super) fn status_error(status: StatusCode, body: &[u8]) -> GatewayError {
    let text = provider_text(status, body);
    match status_class(status) {
        StatusClass::Unauthorized => GatewayError::Unauthorized(text),
        StatusClass::Unknown => GatewayError::Unknown(text),
        StatusClass::Redirect => {
            GatewayError::Rejected(format!("{text} (redirects are not followed: is base_url right?)"))
        }
        StatusClass::Rejected => GatewayError::Rejected(text),
    }
}

#[derive(Deserialize)]
struct Violacao {
    razao: Option<String>,
    propriedade: Option<String>,
}

/// The provider's explanation: RFC 7807 `problem+json` (`type`, `title`, `detail`,
/// `violacoes`), Efí's `{nome, mensagem}`, an OAuth `{error, error_description}`, or the
/// start of the raw body.
pub(super) fn provider_text(status: StatusCode, body: &[u8]) -> String {
    let prefix = format!("HTTP {}", status.as_u16());
    let Ok(Value::Object(json)) = serde_json::from_slice::<Value>(body) else {
        return format!("{prefix}: {}", raw_text(body));
    };
    let field = |name: &str| json.get(name).and_then(Value::as_str).map(str::trim).filter(|s| !s.is_empty());
    if field("nome").is_some() || field("mensagem").is_some() {
        let parts: Vec<&str> = [field("nome"), field("mensagem")].into_iter().flatten().collect();
        return format!("{prefix}: {}", parts.join(": "));
    }
    if field("type").is_some() || field("title").is_some() || field("detail").is_some() {
        let kind = field("type").map(|t| t.rsplit('/').next().unwrap_or(t));
        let mut text = [kind, field("title"), field("detail")].into_iter().flatten().collect::<Vec<_>>().join(": ");
        let violations: Vec<String> = json
            .get("violacoes")
            .and_then(|v| serde_json::from_value::<Vec<Violacao>>(v.clone()).ok())
            .unwrap_or_default()
            .into_iter()
            .map(|v| match (v.propriedade, v.razao) {
                (Some(p), Some(r)) => format!("{p}: {r}"),
                (p, r) => p.or(r).unwrap_or_default(),
            })
            .filter(|v| !v.is_empty())
            .collect();
        if !violations.is_empty() {
            text.push_str(&format!(" ({})", violations.join("; ")));
        }
        return format!("{prefix}: {text}");
    }
    if let Some(error) = field("error") {
        return match field("error_description") {
            Some(description) => format!("{prefix}: {error}: {description}"),
            None => format!("{prefix}: {error}"),
        };
    }
    format!("{prefix}: {}", raw_text(body))
}

fn raw_text(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let words = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match words.char_indices().nth(MAX_RAW_ERROR_CHARS) {
        _ if words.is_empty() => "(empty body)".to_owned(),
        Some((cut, _)) => format!("{}…", &words[..cut]),
        None => words,
    }
}

/// What a failed request means: a TLS handshake the provider refused is our certificate
/// (`Unauthorized`), a provider certificate we do not trust is our settings
/// (`NotConfigured`), anything else (timeout, reset, refused connection) is `Unknown`.
pub(super) fn transport_error(e: &reqwest::Error) -> GatewayError {
    let chain = error_chain(e);
    match find_tls_error(e) {
        Some(rustls::Error::AlertReceived(alert)) => GatewayError::Unauthorized(format!(
            "the provider refused the TLS handshake ({alert:?}): is the client certificate \
             (cert_file, key_file) the one registered with it? {chain}"
        )),
        Some(rustls::Error::InvalidCertificate(_) | rustls::Error::InvalidCertRevocationList(_)) => {
            GatewayError::NotConfigured(format!(
                "the provider's TLS certificate is not trusted (set ca_file if it uses a private CA): {chain}"
            ))
        }
        _ if e.is_timeout() => GatewayError::Unknown(format!("no answer in time: {chain}")),
        _ => GatewayError::Unknown(chain),
    }
}

/// The errors that caused `e`. `io::Error` hides its inner error from `source()`, so the
/// walk steps into it explicitly.
fn causes<'a>(e: &'a (dyn StdError + 'static)) -> impl Iterator<Item = &'a (dyn StdError + 'static)> {
    std::iter::successors(Some(e), |&err: &&'a (dyn StdError + 'static)| {
        match err.downcast_ref::<std::io::Error>().and_then(|io| io.get_ref()) {
            Some(inner) => Some(inner as &(dyn StdError + 'static)),
            None => err.source(),
        }
    })
}

fn find_tls_error(e: &reqwest::Error) -> Option<&rustls::Error> {
    causes(e).find_map(|err| err.downcast_ref::<rustls::Error>())
}

/// `e` and its causes as one line, without repeating a message a wrapper copied.
fn error_chain(e: &reqwest::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    for err in causes(e) {
        let text = err.to_string();
        if !parts.last().is_some_and(|last| last.contains(&text)) {
            parts.push(text);
        }
    }
    parts.join(": ")
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;
    use crate::domain::LedgerKey;
    use crate::domain::PhoneE164;
    use crate::pix::gateway::Payer;
    use crate::pix::http::tests::{EVERY_GATEWAY, class_name};

    fn request(description: &str, expires_at: DateTime<Utc>) -> ChargeRequest {
        let key = LedgerKey::from_stored("pix_charge/v1/abc".into());
        ChargeRequest {
            txid: Txid::for_static(&key),
            key,
            amount: Cents(4550),
            description: description.into(),
            expires_at,
            payer: Payer { phone: PhoneE164::parse("+5511999990000").unwrap(), name: None, document: None },
            window: crate::domain::SendWindow::unbounded(),
        }
    }

    fn at(h: u32, m: u32, s: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2030, 1, 2, h, m, s).unwrap()
    }

    #[test]
    fn the_request_follows_cob_solicitada() {
        let body = cob_request("+5511999990000", &request("  Corte de cabelo ", at(13, 0, 0)), at(12, 0, 0));
        assert_eq!(
            body,
            serde_json::json!({
                "calendario": { "expiracao": 3600 },
                "valor": { "original": "45.50" },
                "chave": "+5511999990000",
                "solicitacaoPagador": "Corte de cabelo"
            })
        );
        let past = cob_request("k", &request("", at(11, 0, 0)), at(12, 0, 0));
        assert_eq!((past["calendario"]["expiracao"].as_i64(), past.get("solicitacaoPagador")), (Some(1), None));
        let long = cob_request("k", &request(&"é".repeat(200), at(13, 0, 0)), at(12, 0, 0));
        assert_eq!(long["solicitacaoPagador"].as_str().map(|s| s.chars().count()), Some(140));
    }

    #[test]
    fn the_payer_is_identified_when_both_document_and_name_are_known() {
        let mut req = request("Corte", at(13, 0, 0));
        req.payer.document = crate::domain::PayerDocument::parse("529.982.247-25").ok();
        assert_eq!(cob_request("k", &req, at(12, 0, 0)).get("devedor"), None, "nome is required with a document");
        req.payer.name = Some(" Maria ".into());
        let body = cob_request("k", &req, at(12, 0, 0));
        assert_eq!(body["devedor"], serde_json::json!({ "cpf": "52998224725", "nome": "Maria" }));
        req.payer.document = crate::domain::PayerDocument::parse("12.ABC.345/01DE-35").ok();
        let body = cob_request("k", &req, at(12, 0, 0));
        assert_eq!(body["devedor"], serde_json::json!({ "cnpj": "12ABC34501DE35", "nome": "Maria" }));
    }

    fn cob(json: Value) -> Cob {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn states_follow_status_and_the_charges_own_expiry() {
        let now = at(12, 0, 0);
        let active = |criacao: &str| {
            cob(serde_json::json!({"status": "ATIVA", "calendario": {"criacao": criacao, "expiracao": 3600}}))
        };
        assert_eq!(active("2030-01-02T11:30:00.358Z").payment_state(now).unwrap(), PaymentState::Pending);
        assert_eq!(active("2030-01-02T10:59:59Z").payment_state(now).unwrap(), PaymentState::Expired);
        assert_eq!(active("not a date").payment_state(now).unwrap(), PaymentState::Pending);
        let paid = cob(serde_json::json!({
            "status": "CONCLUIDA",
            "pix": [{"endToEndId": "E1234567820200909122120200808008", "valor": "110.00"}]
        }));
        let e2e = Some("E1234567820200909122120200808008".to_owned());
        assert_eq!(paid.payment_state(now).unwrap(), PaymentState::Paid { end_to_end_id: e2e });
        let refunded = cob(serde_json::json!({
            "status": "CONCLUIDA",
            "pix": [{"endToEndId": "E1234567820200909122120200808008", "valor": "110.00", "devolucoes": [
                {"id": "123ABC", "rtrId": "D1234567820200909122120200808006", "valor": "110.00", "status": "DEVOLVIDO"}
            ]}]
        }));
        let e2e = Some("E1234567820200909122120200808008".to_owned());
        assert_eq!(
            refunded.payment_state(now).unwrap(),
            PaymentState::Paid { end_to_end_id: e2e },
            "refunded: still paid"
        );
        let paid_bare = cob(serde_json::json!({"status": "CONCLUIDA"}));
        assert_eq!(paid_bare.payment_state(now).unwrap(), PaymentState::Paid { end_to_end_id: None });
        for removed in ["REMOVIDA_PELO_USUARIO_RECEBEDOR", "REMOVIDA_PELO_PSP"] {
            let state = cob(serde_json::json!({ "status": removed })).payment_state(now).unwrap();
            assert_eq!(state, PaymentState::Cancelled);
        }
        let future = cob(serde_json::json!({"status": "EM_ANALISE"})).payment_state(now);
        assert!(matches!(future, Err(GatewayError::Unknown(m)) if m.contains("EM_ANALISE")));
    }

    #[test]
    fn a_found_charge_must_match_the_request() {
        let txid = Txid::for_cob(&LedgerKey::from_stored("k".into()), b"s");
        let ok = cob(serde_json::json!({"txid": txid.as_str(), "valor": {"original": "45.50"}}));
        assert!(ok.check_matches(&txid, Cents(4550)).is_ok());
        assert!(matches!(ok.check_matches(&txid, Cents(100)), Err(GatewayError::Rejected(m)) if m.contains("45.50")));
        let other = cob(serde_json::json!({"txid": "x".repeat(30)}));
        assert!(matches!(other.check_matches(&txid, Cents(4550)), Err(GatewayError::Rejected(_))));
    }

    #[test]
    fn location_ids_are_numbers_or_safe_strings() {
        assert_eq!(cob(serde_json::json!({"loc": {"id": 789}})).loc_id().as_deref(), Some("789"));
        assert_eq!(cob(serde_json::json!({"loc": {"id": "ab-1"}})).loc_id().as_deref(), Some("ab-1"));
        assert_eq!(cob(serde_json::json!({"loc": {"id": "../x"}})).loc_id(), None);
        assert_eq!(cob(serde_json::json!({})).loc_id(), None);
    }

    #[test]
    fn statuses_map_to_what_the_caller_does_next() {
        let extra = [(504, "unknown"), (301, "rejected")];
        for (status, expected) in EVERY_GATEWAY.into_iter().chain(extra) {
            assert_eq!(class_name(&status_error(StatusCode::from_u16(status).unwrap(), b"")), expected, "{status}");
        }
    }

    #[test]
    fn both_error_shapes_keep_the_providers_text() {
        let problem = r#"{
            "type": "https://pix.bcb.gov.br/api/v2/error/CobOperacaoInvalida",
            "title": "Cobrança inválida.",
            "status": 400,
            "detail": "A requisição não respeita o _schema_.",
            "violacoes": [{"razao": "O campo cob.valor.original não respeita o _schema_.", "propriedade": "cob.valor.original"}]
        }"#
        .as_bytes();
        assert_eq!(
            provider_text(StatusCode::BAD_REQUEST, problem),
            "HTTP 400: CobOperacaoInvalida: Cobrança inválida.: A requisição não respeita o _schema_. \
             (cob.valor.original: O campo cob.valor.original não respeita o _schema_.)"
        );
        let efi = r#"{"nome":"txid_duplicado","mensagem":"Campo txid informado já foi utilizado em outra cobrança"}"#
            .as_bytes();
        assert_eq!(
            provider_text(StatusCode::CONFLICT, efi),
            "HTTP 409: txid_duplicado: Campo txid informado já foi utilizado em outra cobrança"
        );
        let oauth = br#"{"error":"invalid_client","error_description":"bad secret"}"#;
        assert_eq!(provider_text(StatusCode::UNAUTHORIZED, oauth), "HTTP 401: invalid_client: bad secret");
        assert_eq!(
            provider_text(StatusCode::BAD_GATEWAY, b"<html>\n  Bad   gateway</html>"),
            "HTTP 502: <html> Bad gateway</html>"
        );
        assert_eq!(provider_text(StatusCode::BAD_GATEWAY, b""), "HTTP 502: (empty body)");
        let long = provider_text(StatusCode::BAD_GATEWAY, "ã".repeat(1000).as_bytes());
        assert_eq!(long.chars().count(), "HTTP 502: ".len() + MAX_RAW_ERROR_CHARS + 1);
        assert!(
            matches!(status_error(StatusCode::BAD_REQUEST, efi), GatewayError::Rejected(m) if m.contains("txid_duplicado"))
        );
    }

    #[test]
    fn the_qrcode_answer_gives_the_code() {
        let body = br#"{"qrcode":"000201...","imagemQrcode":"data:image/png;base64,AAA"}"#;
        assert_eq!(parse_qrcode(body).unwrap(), "000201...");
        assert!(matches!(parse_qrcode(br#"{"imagemQrcode":"x"}"#), Err(GatewayError::Rejected(_))));
        assert!(matches!(parse_qrcode(b"nope"), Err(GatewayError::Unknown(_))));
    }
}
