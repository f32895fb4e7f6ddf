//! Bacen payment callbacks: `POST {registered url}/pix` with `{"pix": [Pix, …]}`.
//!
//! Invariants: a callback is authentic only when it came to the URL with the tenant's secret
//! path segment (compared in constant time); without a configured secret every callback is
//! refused. Each received Pix with a `txid` becomes one event keyed by its `endToEndId`
//! (several may come in one body); a Pix without a txid is not about one of our charges and
//! is skipped. What the body claims is never trusted: the caller asks the provider.
//! Requiring the PSP's client certificate (mutual TLS) is the reverse proxy's job.

use serde::Deserialize;
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
            Some(Notification { event_id: pix.end_to_end_id, charge: NotifiedCharge::Txid(txid) })
        })
        .collect())
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
