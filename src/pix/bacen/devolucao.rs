//! Refunds ("devoluções") in the API Pix: `PUT /pix/{e2eid}/devolucao/{id}` with a
//! `DevolucaoSolicitada` (`{"valor": "12.34"}`), answered `201` with the `Devolucao`; `GET` on the
//! same path reads it back.
//!
//! Invariants:
//! - the devolução's `{id}` is the refund's [`RefundId`](crate::pix::RefundId) (32 hex digits,
//!   inside the spec's `[a-zA-Z0-9]{1,35}`), so every attempt of one refund names one devolução;
//! - the spec answers a `PUT` that reuses an id with `400` (`PixDevolucaoInvalida`), so a `400`
//!   (or an Efí-style `409`) is followed by a `GET`: a devolução under our id for our amount is
//!   the one an earlier attempt made and is returned; otherwise the refusal stands;
//! - the Pix refunded is `req.end_to_end_id`, else the charge's first Pix (`GET /cob/{txid}`);
//!   a charge that received none is refused before anything is sent;
//! - ids go into the path only once checked alphanumeric (they come from the provider or from
//!   our records);
//! - `provider_ref` is the devolução's `rtrId`; `EM_PROCESSAMENTO` is processing, `DEVOLVIDO`
//!   done, `NAO_REALIZADO` failed with its `motivo`;
//! - scopes: `pix.write` for the `PUT`, `pix.read` for the `GET`. The token request names no
//!   scope (the PSP grants the application's), so an application without them gets `403`:
//!   [`GatewayError::Unauthorized`] with the provider's text.

use reqwest::{Method, StatusCode};
use serde::Deserialize;

use super::{BacenGateway, api};
use crate::domain::Cents;
use crate::pix::gateway::GatewayError;
use crate::pix::gateway::{RefundReceipt, RefundRequest, RefundState};
use crate::pix::txid::Txid;

/// `DevolucaoId` is `[a-zA-Z0-9]{1,35}`; an end-to-end id has 32 such characters, and PSPs'
/// examples show shorter ones, so both are bounded alike.
const MAX_PATH_ID_LEN: usize = 35;

/// A devolução as the provider answers it (`Devolucao`); every field optional, read leniently.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Devolucao {
    id: Option<String>,
    rtr_id: Option<String>,
    valor: Option<String>,
    status: Option<String>,
    motivo: Option<String>,
}

impl BacenGateway {
    /// `PUT /pix/{e2eid}/devolucao/{id}`, or the devolução an earlier attempt made under `req.id`.
    pub(super) async fn request_refund(&self, req: &RefundRequest) -> Result<RefundReceipt, GatewayError> {
        if req.amount.0 <= 0 {
            return Err(GatewayError::Rejected(format!("a refund must be positive, not {}", req.amount)));
        }
        let id = path_id("refund id", req.id.as_str())?;
        let Some(e2eid) = self.end_to_end_id(req).await? else {
            return Err(GatewayError::Rejected(format!(
                "charge {} was not paid: there is no Pix to refund",
                req.charge.txid
            )));
        };
        let path = devolucao_path(&e2eid, id);
        let body = serde_json::json!({ "valor": req.amount.to_decimal() });
        let reply = self.call(Method::PUT, &path, Some(&body)).await?;
        match reply.status {
            status if status.is_success() => {
                let devolucao = parse(&reply.body)?;
                devolucao.check_matches(id, req.amount)?;
                receipt(devolucao)
            }
            // A reused id is refused: if it is ours, an earlier attempt made this refund.
            StatusCode::BAD_REQUEST | StatusCode::CONFLICT => {
                let refusal = api::status_error(reply.status, &reply.body);
                match self.get_devolucao(&path).await? {
                    // One under our id that does not match what we asked is not a refusal: a
                    // devolução exists, so nothing is released; the operator has to look.
                    Some(found) => {
                        found.check_matches(id, req.amount)?;
                        receipt(found)
                    }
                    None => Err(refusal),
                }
            }
            status => Err(api::status_error(status, &reply.body)),
        }
    }

    /// `GET /pix/{e2eid}/devolucao/{id}`: `None` when the provider has no such devolução, or
    /// when the charge received no Pix (so none can have been refunded).
    pub(super) async fn lookup_refund(&self, req: &RefundRequest) -> Result<Option<RefundReceipt>, GatewayError> {
        let id = path_id("refund id", req.id.as_str())?;
        let Some(e2eid) = self.end_to_end_id(req).await? else { return Ok(None) };
        self.get_devolucao(&devolucao_path(&e2eid, id)).await?.map(receipt).transpose()
    }

    /// The Pix to refund: the caller's, or the charge's first; `None` if it received none.
    async fn end_to_end_id(&self, req: &RefundRequest) -> Result<Option<String>, GatewayError> {
        if let Some(given) = req.end_to_end_id.as_deref().map(str::trim).filter(|e| !e.is_empty()) {
            return path_id("end-to-end id", given).map(|e| Some(e.to_owned()));
        }
        let txid = Txid::parse(&req.charge.txid).map_err(|e| GatewayError::Rejected(e.to_string()))?;
        let cob = self
            .get_cob(&txid)
            .await?
            .ok_or_else(|| GatewayError::Rejected(format!("the provider has no charge with txid {txid}")))?;
        cob.end_to_end_id().map(|e| path_id("end-to-end id", e).map(str::to_owned)).transpose()
    }

    async fn get_devolucao(&self, path: &str) -> Result<Option<Devolucao>, GatewayError> {
        let reply = self.call(Method::GET, path, None).await?;
        match reply.status {
            StatusCode::OK => parse(&reply.body).map(Some),
            StatusCode::NOT_FOUND => Ok(None),
            status => Err(api::status_error(status, &reply.body)),
        }
    }
}

impl Devolucao {
    /// The devolução under our id must be the one we asked for: same id, same amount.
    fn check_matches(&self, id: &str, amount: Cents) -> Result<(), GatewayError> {
        if let Some(theirs) = self.id.as_deref()
            && theirs != id
        {
            return Err(GatewayError::Unknown(format!(
                "asked for devolução {id}, the provider answered with {theirs}"
            )));
        }
        match self.valor.as_deref() {
            Some(valor) if Cents::parse_decimal(valor).ok() != Some(amount) => Err(GatewayError::Unknown(format!(
                "devolução {id} at the provider is of {valor}, not {}",
                amount.to_decimal()
            ))),
            _ => Ok(()),
        }
    }
}

fn devolucao_path(e2eid: &str, id: &str) -> String {
    format!("/pix/{e2eid}/devolucao/{id}")
}

/// `value`, if it can go into a path as is: `[a-zA-Z0-9]{1,35}`.
fn path_id<'a>(what: &str, value: &'a str) -> Result<&'a str, GatewayError> {
    if value.is_empty() || value.len() > MAX_PATH_ID_LEN || !value.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return Err(GatewayError::Rejected(format!("{what} {value:?} is not [a-zA-Z0-9]{{1,35}}")));
    }
    Ok(value)
}

/// A `2xx` whose body we cannot read: the devolução may well exist.
fn parse(body: &[u8]) -> Result<Devolucao, GatewayError> {
    serde_json::from_slice(body)
        .map_err(|e| GatewayError::Unknown(format!("the provider's devolução is unreadable: {e}")))
}

fn receipt(devolucao: Devolucao) -> Result<RefundReceipt, GatewayError> {
    let state = match devolucao.status.as_deref() {
        Some("EM_PROCESSAMENTO") => RefundState::Processing,
        Some("DEVOLVIDO") => RefundState::Done,
        Some("NAO_REALIZADO") => RefundState::Failed(
            devolucao
                .motivo
                .map(|m| m.trim().to_owned())
                .filter(|m| !m.is_empty())
                .unwrap_or_else(|| "the provider did not make the devolução".to_owned()),
        ),
        Some(other) => {
            return Err(GatewayError::Unknown(format!(
                "the provider reports devolução status {other:?}, unknown here"
            )));
        }
        None => return Err(GatewayError::Unknown("the provider's devolução has no status".into())),
    };
    Ok(RefundReceipt { state, provider_ref: devolucao.rtr_id.filter(|r| !r.trim().is_empty()) })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(json: serde_json::Value) -> Result<RefundReceipt, GatewayError> {
        receipt(serde_json::from_value(json).unwrap())
    }

    #[test]
    fn statuses_map_to_refund_states() {
        let rtr = "D12345678202009091000abcde123456";
        let processing = read(serde_json::json!({ "id": "123456", "rtrId": rtr, "valor": "7.89",
            "horario": { "solicitacao": "2020-09-11T15:25:59.411Z" }, "status": "EM_PROCESSAMENTO" }));
        assert_eq!(
            processing.unwrap(),
            RefundReceipt { state: RefundState::Processing, provider_ref: Some(rtr.into()) }
        );
        let done = read(serde_json::json!({ "rtrId": rtr, "status": "DEVOLVIDO" })).unwrap();
        assert_eq!(done.state, RefundState::Done);
        let failed = read(serde_json::json!({ "status": "NAO_REALIZADO", "motivo": "Negado por timeout" })).unwrap();
        assert_eq!(
            failed,
            RefundReceipt { state: RefundState::Failed("Negado por timeout".into()), provider_ref: None }
        );
        assert!(matches!(
            read(serde_json::json!({ "status": "NAO_REALIZADO" })).unwrap().state,
            RefundState::Failed(_)
        ));
        assert!(
            matches!(read(serde_json::json!({ "status": "OUTRO" })), Err(GatewayError::Unknown(m)) if m.contains("OUTRO"))
        );
        assert!(matches!(read(serde_json::json!({})), Err(GatewayError::Unknown(_))));
        assert!(matches!(parse(b"<html>"), Err(GatewayError::Unknown(_))));
    }

    #[test]
    fn a_found_devolucao_must_be_ours_or_it_is_unknown() {
        let found: Devolucao = serde_json::from_value(serde_json::json!({ "id": "abc1", "valor": "7.89" })).unwrap();
        assert!(found.check_matches("abc1", Cents(789)).is_ok());
        assert!(matches!(found.check_matches("abc1", Cents(790)), Err(GatewayError::Unknown(m)) if m.contains("7.89")));
        assert!(found.check_matches("abc2", Cents(789)).is_err());
    }

    #[test]
    fn only_alphanumeric_ids_go_into_a_path() {
        assert_eq!(path_id("id", "E1234567820200909122120200808008").unwrap(), "E1234567820200909122120200808008");
        for bad in ["", "../cob", "a b", "é", &"a".repeat(36)] {
            assert!(matches!(path_id("id", bad), Err(GatewayError::Rejected(_))), "{bad:?}");
        }
    }
}
