//! Bacen payment callbacks: `POST {registered url}/pix` with `{"pix": [Pix, …]}`.
//!
//! Invariants: a callback is authentic only when it came to the URL with the tenant's secret
//! path segment (compared in constant time); without a configured secret every callback is
//! refused. Each received Pix with a `txid` becomes one event keyed by its `endToEndId`
//! (several may come in one body); a Pix without a txid is not about one of our charges and
//! is skipped. A Pix that carries `devolucoes` (the PSP calls back again when a devolução
//! settles) is keyed by its `endToEndId` plus each devolução's id and status, so deduplication
//! keeps it apart from the payment's event and from the same refund's earlier state. What the
//! body claims is never trusted: the caller asks the provider.
//! Requiring the PSP's client certificate (mutual TLS) is the reverse proxy's job.

use serde::Deserialize;
use serde_json::Value;
use subtle::ConstantTimeEq;

use crate::domain::Secret;
use crate::pix::gateway::{Notification, NotificationError, NotifiedCharge, WebhookRequest};

#[derive(Deserialize)]
struct Callback {
    pix: Vec<Received>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Received {
    end_to_end_id: String,
    txid: Option<String>,
    /// Read loosely: a devolução we cannot read must not cost the payment's event.
    #[serde(default)]
    devolucoes: Option<Value>,
}

pub(super) fn read(
    expected: Option<&Secret>,
    request: &WebhookRequest<'_>,
) -> Result<Vec<Notification>, NotificationError> {
    let (Some(expected), Some(given)) = (expected, request.path_secret) else {
        return Err(NotificationError::Unauthenticated);
    };
    if !bool::from(given.as_bytes().ct_eq(expected.expose().as_bytes())) {
        return Err(NotificationError::Unauthenticated);
    }
    read_callback(request.body)
}

/// The events of a callback body already authenticated: one per received Pix with a txid.
/// Public (as `bacen::read_callback`) for the fuzz targets; never panics.
pub fn read_callback(body: &[u8]) -> Result<Vec<Notification>, NotificationError> {
    let callback: Callback = serde_json::from_slice(body).map_err(|e| NotificationError::Malformed(e.to_string()))?;
    Ok(callback
        .pix
        .into_iter()
        .filter(|pix| !pix.end_to_end_id.trim().is_empty())
        .filter_map(|pix| {
            let txid = pix.txid.filter(|t| !t.trim().is_empty())?;
            let event_id = event_id(pix.end_to_end_id, pix.devolucoes.as_ref());
            Some(Notification { event_id, charge: NotifiedCharge::Txid(txid) })
        })
        .collect())
}

/// `endToEndId`, or `endToEndId/devolucoes:<id>=<status>,…` (sorted) for a Pix with devoluções.
fn event_id(end_to_end_id: String, devolucoes: Option<&Value>) -> String {
    let mut parts: Vec<String> = devolucoes
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|d| {
            let id = d.get("id")?.as_str()?.trim();
            let status = d.get("status").and_then(Value::as_str).unwrap_or_default().trim();
            (!id.is_empty()).then(|| format!("{id}={status}"))
        })
        .collect();
    if parts.is_empty() {
        return end_to_end_id;
    }
    parts.sort();
    parts.dedup();
    format!("{end_to_end_id}/devolucoes:{}", parts.join(","))
}

#[cfg(test)]
mod tests {
    use reqwest::header::HeaderMap;

    use super::*;

    const BODY: &[u8] = br#"{"pix": [
        {"endToEndId": "E87654321202009091221dfghi123456", "txid": "971122d8f37211eaadc10242ac120002",
         "valor": "110.00", "horario": "2020-09-09T20:15:00.358Z", "infoPagador": "0123456789"},
        {"endToEndId": "E1803615022211340s08793XPJ", "valor": "0.01", "horario": "2020-12-21T13:40:34.000Z"},
        {"endToEndId": "E1803615022211340s08793XPK", "txid": "fc9a43k6ff384ryP5f41719", "chave": "k",
         "valor": "0.01", "horario": "2020-12-21T13:40:34.000Z", "gnExtras": {"tarifa": "0.00"}}
    ]}"#;

    fn read_with(
        secret: Option<&str>,
        path_secret: Option<&str>,
        body: &[u8],
    ) -> Result<Vec<Notification>, NotificationError> {
        let headers = HeaderMap::new();
        let request = WebhookRequest { headers: &headers, query: None, path_secret, body };
        read(secret.map(Secret::new).as_ref(), &request)
    }

    #[test]
    fn each_pix_with_a_txid_is_an_event() {
        let events = read_with(Some("s3cr3t"), Some("s3cr3t"), BODY).unwrap();
        assert_eq!(
            events,
            vec![
                Notification {
                    event_id: "E87654321202009091221dfghi123456".into(),
                    charge: NotifiedCharge::Txid("971122d8f37211eaadc10242ac120002".into()),
                },
                Notification {
                    event_id: "E1803615022211340s08793XPK".into(),
                    charge: NotifiedCharge::Txid("fc9a43k6ff384ryP5f41719".into()),
                },
            ]
        );
        assert_eq!(read_with(Some("s"), Some("s"), br#"{"pix": []}"#).unwrap(), vec![]);
    }

    #[test]
    fn a_pix_with_devolucoes_is_an_event_of_its_own() {
        let body = |devolucoes: &str| {
            format!(
                r#"{{"pix": [{{"endToEndId": "E1", "txid": "t1", "valor": "110.00", "horario": "2020-09-09T20:15:00.358Z",
                    "devolucoes": {devolucoes}}}]}}"#
            )
        };
        let event = |devolucoes: &str| read_with(Some("s"), Some("s"), body(devolucoes).as_bytes()).unwrap()[0].clone();
        let processing = event(
            r#"[{"id": "b2", "rtrId": "D1", "valor": "1.00", "status": "EM_PROCESSAMENTO"},
                                   {"id": "a1", "rtrId": "D2", "valor": "2.00", "status": "DEVOLVIDO"}]"#,
        );
        assert_eq!(processing.event_id, "E1/devolucoes:a1=DEVOLVIDO,b2=EM_PROCESSAMENTO");
        assert_eq!(processing.charge, NotifiedCharge::Txid("t1".into()));
        let done = event(r#"[{"id": "a1", "status": "DEVOLVIDO"}, {"id": "b2", "status": "DEVOLVIDO"}]"#);
        assert_eq!(done.event_id, "E1/devolucoes:a1=DEVOLVIDO,b2=DEVOLVIDO");
        // Nothing readable in them: the payment's own event.
        for unreadable in ["[]", "null", "{}", r#"[{"status": "DEVOLVIDO"}, 7]"#] {
            assert_eq!(event(unreadable).event_id, "E1", "{unreadable}");
        }
    }

    #[test]
    fn only_the_secret_path_authenticates() {
        for (secret, given) in
            [(Some("s3cr3t"), Some("s3cr3u")), (Some("s3cr3t"), None), (None, Some("s3cr3t")), (None, None)]
        {
            assert_eq!(read_with(secret, given, BODY), Err(NotificationError::Unauthenticated), "{secret:?} {given:?}");
        }
    }

    #[test]
    fn a_malformed_body_is_refused_after_authentication() {
        for body in [&b"not json"[..], br#"{"evento": "x"}"#, br#"{"pix": [{"txid": "abc"}]}"#, br#"{"pix": {}}"#] {
            assert!(matches!(read_with(Some("s"), Some("s"), body), Err(NotificationError::Malformed(_))));
        }
        assert_eq!(read_with(Some("s"), Some("x"), b"not json"), Err(NotificationError::Unauthenticated));
    }
}
