//! Mercado Pago's notifications: the `x-signature` check and the events they carry (see the
//! parent module's docs for the manifest and the event id).

use hmac::{Hmac, KeyInit, Mac};
use reqwest::Url;
use serde_json::Value;
use sha2::Sha256;

use super::id_text;
use crate::domain::Secret;
use crate::pix::gateway::{Notification, NotificationError, NotifiedCharge, WebhookRequest};

/// Authenticates `request` with `secret` (none configured: nothing is authentic) and reads it.
pub(super) fn read(
    secret: Option<&Secret>,
    request: &WebhookRequest<'_>,
) -> Result<Vec<Notification>, NotificationError> {
    let secret = secret.ok_or(NotificationError::Unauthenticated)?;
    let header = |name: &str| request.headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim);
    let signature = header("x-signature").ok_or(NotificationError::Unauthenticated)?;
    let (ts, v1) = parse_signature(signature).ok_or(NotificationError::Unauthenticated)?;
    let request_id = header("x-request-id").filter(|r| !r.is_empty());
    let query = query_pairs(request.query);
    let body: Option<Value> = serde_json::from_slice(request.body).ok();
    let data_id = query_value(&query, "data.id")
        .or_else(|| body.as_ref().and_then(|b| b.pointer("/data/id")).and_then(id_text))
        .filter(|id| !id.is_empty());
    let manifest = manifest(data_id.as_deref(), request_id, ts);
    verify(secret, &manifest, v1)?;

    let body = body.ok_or_else(|| NotificationError::Malformed("the body is not JSON".into()))?;
    let kind = body
        .get("type")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .or_else(|| query_value(&query, "type"))
        .or_else(|| query_value(&query, "topic"))
        .ok_or_else(|| NotificationError::Malformed("the notification has no type".into()))?;
    if kind != "payment" {
        return Ok(Vec::new());
    }
    let data_id =
        data_id.ok_or_else(|| NotificationError::Malformed("a payment notification without data.id".into()))?;
    let event_id = match body.get("id").and_then(id_text).filter(|id| !id.is_empty()) {
        Some(id) => id,
        None => format!("{data_id}:{}", request_id.unwrap_or(ts)),
    };
    Ok(vec![Notification { event_id, charge: NotifiedCharge::ProviderRef(data_id) }])
}

/// `ts=<unix>,v1=<hex>` → `(ts, v1)`; the parts may come in any order.
fn parse_signature(header: &str) -> Option<(&str, &str)> {
    let (mut ts, mut v1) = (None, None);
    for part in header.split(',') {
        match part.split_once('=').map(|(k, v)| (k.trim(), v.trim())) {
            Some(("ts", value)) if !value.is_empty() => ts = Some(value),
            Some(("v1", value)) if !value.is_empty() => v1 = Some(value),
            _ => {}
        }
    }
    Some((ts?, v1?))
}

/// What Mercado Pago signs; a part whose value is absent is left out.
fn manifest(data_id: Option<&str>, request_id: Option<&str>, ts: &str) -> String {
    let mut manifest = String::new();
    if let Some(id) = data_id {
        manifest.push_str(&format!("id:{id};"));
    }
    if let Some(request_id) = request_id {
        manifest.push_str(&format!("request-id:{request_id};"));
    }
    manifest.push_str(&format!("ts:{ts};"));
    manifest
}

fn verify(secret: &Secret, manifest: &str, v1: &str) -> Result<(), NotificationError> {
    let expected = hex::decode(v1).map_err(|_| NotificationError::Unauthenticated)?;
    let mut mac =
        Hmac::<Sha256>::new_from_slice(secret.expose().as_bytes()).map_err(|_| NotificationError::Unauthenticated)?;
    mac.update(manifest.as_bytes());
    // verify_slice compares in constant time.
    mac.verify_slice(&expected).map_err(|_| NotificationError::Unauthenticated)
}

fn query_pairs(query: Option<&str>) -> Vec<(String, String)> {
    let Some(query) = query.map(|q| q.trim_start_matches('?')).filter(|q| !q.is_empty()) else { return Vec::new() };
    Url::parse(&format!("http://query.invalid/?{query}"))
        .map(|url| url.query_pairs().map(|(k, v)| (k.into_owned(), v.into_owned())).collect())
        .unwrap_or_default()
}

fn query_value(pairs: &[(String, String)], name: &str) -> Option<String> {
    pairs.iter().find(|(k, _)| k == name).map(|(_, v)| v.trim().to_owned()).filter(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_parse_in_any_order_and_manifests_skip_absent_parts() {
        assert_eq!(parse_signature("ts=1704908010,v1=abc"), Some(("1704908010", "abc")));
        assert_eq!(parse_signature(" v1=abc , ts=1 "), Some(("1", "abc")));
        assert_eq!(parse_signature("ts=1"), None);
        assert_eq!(parse_signature("garbage"), None);
        assert_eq!(manifest(Some("123"), Some("r-1"), "9"), "id:123;request-id:r-1;ts:9;");
        assert_eq!(manifest(None, None, "9"), "ts:9;");
    }

    #[test]
    fn query_strings_are_decoded() {
        let pairs = query_pairs(Some("data.id=123&type=payment&x=a%20b"));
        assert_eq!(query_value(&pairs, "data.id").as_deref(), Some("123"));
        assert_eq!(query_value(&pairs, "x").as_deref(), Some("a b"));
        assert_eq!(query_value(&query_pairs(None), "data.id"), None);
    }
}
