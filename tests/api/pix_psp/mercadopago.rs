//! The Mercado Pago gateway against its loopback fake.

mod refunds;

use std::collections::HashMap;

use balcao::domain::{Cents, LedgerKey};
use balcao::pix::mercadopago::{MercadoPagoGateway, PayerEmail, idempotency_key};
use balcao::pix::{
    CancelOutcome, ChargeRef, GatewayError, MapSecrets, Notification, NotificationError, NotifiedCharge, PaymentState,
    PixGateway, WebhookRequest, decode,
};
use chrono::{DateTime, TimeDelta, Utc};
use hmac::{Hmac, KeyInit, Mac};
use reqwest::header::HeaderMap as ReqwestHeaders;
use serde_json::json;
use sha2::Sha256;

use super::{SHORT_TIMEOUT, request};
use crate::support::fake_mercadopago::{ACCESS_TOKEN, FIRST_ID, FakeMercadoPago, Fault, Route, WEBHOOK_SECRET};

fn in_a_day() -> DateTime<Utc> {
    Utc::now() + TimeDelta::days(1)
}

fn same_key_on_every_post(fake: &FakeMercadoPago, key: &str) {
    let expected = idempotency_key(&LedgerKey::from_stored(key.to_owned()));
    let posts = fake.posts();
    assert!(!posts.is_empty());
    for post in posts {
        assert_eq!(post.idempotency_key.as_deref(), Some(expected.as_str()), "{post:?}");
    }
}

#[tokio::test]
async fn mercadopago_creates_a_pix_payment_and_returns_its_code() {
    let fake = FakeMercadoPago::start().await;
    let gateway = fake.gateway();
    let req = request("charge/v1/first", 4550, in_a_day());

    let created = gateway.create(&req).await.unwrap();

    let payments = fake.payments();
    assert_eq!(payments.len(), 1);
    let payment = &payments[0];
    assert_eq!(created.provider_ref, Some((FIRST_ID + 1).to_string()));
    assert_eq!(created.copia_e_cola, payment["point_of_interaction"]["transaction_data"]["qr_code"]);
    assert_eq!(decode(&created.copia_e_cola).unwrap().amount(), Some(Cents(4550)));
    let expiry = DateTime::parse_from_rfc3339(payment["date_of_expiration"].as_str().unwrap()).unwrap();
    assert_eq!(created.expires_at, expiry);
    assert!(payment["date_of_expiration"].as_str().unwrap().ends_with("-03:00"), "{payment}");

    let post = &fake.posts()[0];
    assert_eq!(post.authorization.as_deref(), Some(format!("Bearer {ACCESS_TOKEN}").as_str()));
    assert_eq!(post.body["transaction_amount"], json!(45.5));
    assert_eq!(post.body["payment_method_id"], "pix");
    assert_eq!(post.body["description"], "Corte de cabelo");
    assert_eq!(post.body["external_reference"], req.txid.as_str());
    assert_eq!(
        post.body["payer"],
        json!({ "email": "551199990000@clientes.barbearia.com.br", "first_name": "Maria",
                "identification": { "type": "CPF", "number": "52998224725" } })
    );
    same_key_on_every_post(&fake, "charge/v1/first");

    assert_eq!(gateway.find(&req).await.unwrap(), Some(created.clone()));
    assert_eq!(gateway.create(&req).await.unwrap(), created, "the key replays the same payment");
    assert_eq!(fake.payments().len(), 1);
    assert_eq!(gateway.find(&request("charge/v1/never", 4550, in_a_day())).await.unwrap(), None);

    let fixed = gateway.with_payer_email(PayerEmail::Fixed("pagamentos@barbearia.com.br".into()));
    fixed.create(&request("charge/v1/fixed", 1000, in_a_day())).await.unwrap();
    assert_eq!(fake.posts().last().unwrap().body["payer"]["email"], "pagamentos@barbearia.com.br");
}

#[tokio::test]
async fn mercadopago_server_error_is_unknown_then_the_same_key_creates_one_payment() {
    let fake = FakeMercadoPago::start().await;
    let gateway = fake.gateway();
    let req = request("charge/v1/5xx", 4550, in_a_day());
    fake.fail(
        Route::CreatePayment,
        Fault::Respond(
            500,
            json!({ "message": "internal_error", "error": "internal_error", "status": 500, "cause": [] }),
        ),
    );

    let error = gateway.create(&req).await.unwrap_err();
    assert!(matches!(&error, GatewayError::Unknown(m) if m.contains("internal_error")), "{error:?}");
    assert_eq!(gateway.find(&req).await.unwrap(), None);
    let created = gateway.create(&req).await.unwrap();

    assert_eq!(fake.payments().len(), 1);
    assert_eq!(fake.posts().len(), 2);
    same_key_on_every_post(&fake, "charge/v1/5xx");
    assert_eq!(created.provider_ref, Some((FIRST_ID + 1).to_string()));
}

#[tokio::test]
async fn mercadopago_timeout_after_the_payment_was_created_is_found_not_created_again() {
    let fake = FakeMercadoPago::start().await;
    let gateway = fake.gateway().with_timeout(SHORT_TIMEOUT).unwrap();
    let req = request("charge/v1/timeout", 4550, in_a_day());
    fake.fail(Route::CreatePayment, Fault::ActThenHang);

    let error = gateway.create(&req).await.unwrap_err();
    assert!(matches!(&error, GatewayError::Unknown(m) if m.contains("timed out")), "{error:?}");
    assert_eq!(fake.payments().len(), 1, "the provider did create it");
    let code = fake.payments()[0]["point_of_interaction"]["transaction_data"]["qr_code"].as_str().unwrap().to_owned();

    let found = gateway.find(&req).await.unwrap().expect("the payment the timed-out call created");
    assert_eq!(found.copia_e_cola, code);
    assert_eq!(found.provider_ref, Some((FIRST_ID + 1).to_string()));

    // The search index lags a fresh payment: `find` misses it, and the create that follows
    // carries the same key, so Mercado Pago answers with the same payment.
    fake.fail(Route::SearchPayments, Fault::Respond(200, json!({ "paging": { "total": 0 }, "results": [] })));
    assert_eq!(gateway.find(&req).await.unwrap(), None);
    let again = gateway.create(&req).await.unwrap();
    assert_eq!(again.copia_e_cola, code);
    assert_eq!(fake.payments().len(), 1);
    assert_eq!(fake.posts().len(), 2);
    same_key_on_every_post(&fake, "charge/v1/timeout");
}

#[tokio::test]
async fn mercadopago_a_409_for_a_key_still_in_flight_is_unknown_and_the_retry_finds_one_payment() {
    let fake = FakeMercadoPago::start().await;
    let gateway = fake.gateway().with_timeout(SHORT_TIMEOUT).unwrap();
    let req = request("charge/v1/in-flight", 4550, in_a_day());
    fake.fail(Route::CreatePayment, Fault::HoldUntilReleased);

    let error = gateway.create(&req).await.unwrap_err();
    assert!(matches!(&error, GatewayError::Unknown(m) if m.contains("timed out")), "{error:?}");
    // The first create is still being processed: its key is in use.
    let error = gateway.create(&req).await.unwrap_err();
    assert!(
        matches!(&error, GatewayError::Unknown(m) if m.contains("409")),
        "a key in flight is not a refusal: {error:?}"
    );
    assert_eq!(fake.payments().len(), 0);

    fake.release();
    for _ in 0..200 {
        if !fake.payments().is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let created = gateway.create(&req).await.unwrap();
    assert_eq!(fake.payments().len(), 1, "one payment for one key");
    assert_eq!(created.provider_ref, Some((FIRST_ID + 1).to_string()));
    same_key_on_every_post(&fake, "charge/v1/in-flight");
}

#[tokio::test]
async fn mercadopago_cancel_cancels_a_pending_payment_and_reports_one_paid_meanwhile() {
    let fake = FakeMercadoPago::start().await;
    let gateway = fake.gateway();
    let created = gateway.create(&request("charge/v1/cancel", 4550, in_a_day())).await.unwrap();
    let charge = ChargeRef { txid: created.txid.as_str().to_owned(), provider_ref: created.provider_ref.clone() };
    assert_eq!(gateway.cancel(&charge).await.unwrap(), CancelOutcome::Cancelled);
    assert_eq!(fake.payments()[0]["status"], "cancelled");
    assert_eq!(gateway.cancel(&charge).await.unwrap(), CancelOutcome::Cancelled, "cancelled already: still cancelled");

    let paid = gateway.create(&request("charge/v1/cancel-paid", 4550, in_a_day())).await.unwrap();
    let id = paid.provider_ref.clone().unwrap();
    fake.update(&id, json!({ "status": "approved", "status_detail": "accredited" }));
    let paid = ChargeRef { txid: paid.txid.as_str().to_owned(), provider_ref: Some(id) };
    assert_eq!(gateway.cancel(&paid).await.unwrap(), CancelOutcome::Paid { end_to_end_id: None });
}

#[tokio::test]
async fn mercadopago_connection_reset_is_unknown() {
    let fake = FakeMercadoPago::start().await;
    let gateway = fake.gateway();
    let req = request("charge/v1/reset", 4550, in_a_day());
    fake.loopback.reset_next("POST /v1/payments");

    let error = gateway.create(&req).await.unwrap_err();
    assert!(matches!(&error, GatewayError::Unknown(m) if m.contains("broke off")), "{error:?}");
    assert_eq!(fake.payments().len(), 0);
    assert_eq!(gateway.find(&req).await.unwrap(), None);
    gateway.create(&req).await.unwrap();
    assert_eq!(fake.payments().len(), 1);
    same_key_on_every_post(&fake, "charge/v1/reset");
}

#[tokio::test]
async fn mercadopago_validation_error_is_rejected_with_its_message() {
    let fake = FakeMercadoPago::start().await;
    let body = json!({ "message": "Invalid request data", "error": "bad_request", "status": 400,
        "cause": [{ "code": 4037, "description": "Invalid transaction_amount" }] });
    fake.fail(Route::CreatePayment, Fault::Respond(400, body));
    let error = fake.gateway().create(&request("charge/v1/bad", 4550, in_a_day())).await.unwrap_err();
    assert!(
        matches!(&error, GatewayError::Rejected(m) if m.contains("Invalid request data: Invalid transaction_amount")),
        "{error:?}"
    );
    assert_eq!(fake.payments().len(), 0);
}

#[tokio::test]
async fn mercadopago_wrong_token_is_unauthorized_and_the_payer_email_is_required() {
    let fake = FakeMercadoPago::start().await;
    let error =
        fake.gateway_with("APP_USR-wrong").create(&request("charge/v1/tok", 4550, in_a_day())).await.unwrap_err();
    assert!(matches!(&error, GatewayError::Unauthorized(m) if m.contains("invalid access token")), "{error:?}");

    let mut settings = fake.settings();
    settings.provider.payer_email = None;
    let token = ("MP_ACCESS_TOKEN".to_owned(), ACCESS_TOKEN.to_owned());
    let error =
        MercadoPagoGateway::new(&settings, &MapSecrets(HashMap::from([token.clone()]))).err().expect("no e-mail");
    assert!(matches!(&error, GatewayError::NotConfigured(m) if m.contains("[pix] payer_email")), "{error:?}");
    // A tenant set up before the setting existed keeps its variable.
    let legacy = ("MP_ACCESS_TOKEN_PAYER_EMAIL".to_owned(), "@clientes.barbearia.com.br".to_owned());
    let gateway = MercadoPagoGateway::new(&settings, &MapSecrets(HashMap::from([token, legacy]))).expect("legacy");
    gateway.create(&request("charge/v1/legacy", 4550, in_a_day())).await.expect("created");
}

#[tokio::test]
async fn mercadopago_states_follow_the_payment_status() {
    let fake = FakeMercadoPago::start().await;
    let gateway = fake.gateway();
    let req = request("charge/v1/state", 4550, in_a_day());
    let created = gateway.create(&req).await.unwrap();
    let id = created.provider_ref.clone().unwrap();
    let by_id = ChargeRef { txid: req.txid.as_str().to_owned(), provider_ref: Some(id.clone()) };
    let by_reference = ChargeRef { provider_ref: None, ..by_id.clone() };

    assert_eq!(gateway.state(&by_id).await.unwrap(), PaymentState::Pending);
    for (status, detail, expected) in [
        ("approved", "accredited", PaymentState::Paid { end_to_end_id: None }),
        ("in_process", "pending_review_manual", PaymentState::Pending),
        ("cancelled", "expired", PaymentState::Expired),
        ("cancelled", "by_collector", PaymentState::Cancelled),
        ("rejected", "cc_rejected_other_reason", PaymentState::Cancelled),
        // Refunded: the money was received, the refund is tracked on its own.
        ("refunded", "refunded", PaymentState::Paid { end_to_end_id: None }),
        ("approved", "partially_refunded", PaymentState::Paid { end_to_end_id: None }),
        ("pending", "pending_waiting_transfer", PaymentState::Pending),
    ] {
        fake.update(&id, json!({ "status": status, "status_detail": detail }));
        assert_eq!(gateway.state(&by_id).await.unwrap(), expected, "{status}/{detail}");
        assert_eq!(gateway.state(&by_reference).await.unwrap(), expected, "{status}/{detail} by external_reference");
    }
    let unknown = ChargeRef { txid: "nosuchtxid".into(), provider_ref: Some("1".into()) };
    assert!(matches!(gateway.state(&unknown).await, Err(GatewayError::Rejected(m)) if m.contains("Payment not found")));
}

fn sign(secret: &str, manifest: &str) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(manifest.as_bytes());
    hex::encode(mac.finalize().into_bytes())
}

fn headers(signature: Option<String>, request_id: Option<&str>) -> ReqwestHeaders {
    let mut headers = ReqwestHeaders::new();
    if let Some(signature) = signature {
        headers.insert("x-signature", signature.parse().unwrap());
    }
    if let Some(request_id) = request_id {
        headers.insert("x-request-id", request_id.parse().unwrap());
    }
    headers
}

#[tokio::test]
async fn mercadopago_notifications_need_a_valid_signature() {
    let fake = FakeMercadoPago::start().await;
    let gateway = fake.gateway();
    let notify = |headers: &ReqwestHeaders, query: Option<&str>, body: &[u8]| {
        gateway.notifications(&WebhookRequest { headers, query, path_secret: None, body })
    };
    let request_id = "bb56a2f1-6aae-46ac-982e-9dcd3581d08e";
    let ts = "1704908010";
    let good = format!("ts={ts},v1={}", sign(WEBHOOK_SECRET, &format!("id:123456;request-id:{request_id};ts:{ts};")));
    let body = br#"{"id":12345,"live_mode":true,"type":"payment","date_created":"2015-03-25T10:04:58.396-04:00",
        "user_id":44444,"api_version":"v1","action":"payment.updated","data":{"id":"123456"}}"#;

    let event = |event_id: &str| {
        vec![Notification { event_id: event_id.into(), charge: NotifiedCharge::ProviderRef("123456".into()) }]
    };
    assert_eq!(
        notify(&headers(Some(good.clone()), Some(request_id)), Some("data.id=123456&type=payment"), body).unwrap(),
        event("12345")
    );
    // data.id from the body when the query has none; without the body's id, data.id and the request id.
    let bare = br#"{"action":"payment.updated","type":"payment","data":{"id":"123456"}}"#;
    assert_eq!(
        notify(&headers(Some(good.clone()), Some(request_id)), None, bare).unwrap(),
        event(&format!("123456:{request_id}"))
    );

    let forged =
        format!("ts={ts},v1={}", sign("not-the-secret", &format!("id:123456;request-id:{request_id};ts:{ts};")));
    for (headers, query) in [
        (headers(Some(forged), Some(request_id)), Some("data.id=123456&type=payment")),
        // Another payment, another request or another time under the same signature.
        (headers(Some(good.clone()), Some(request_id)), Some("data.id=999999&type=payment")),
        (headers(Some(good.clone()), Some("other-request")), Some("data.id=123456&type=payment")),
        (headers(Some(good.replace(ts, "1704908011")), Some(request_id)), Some("data.id=123456&type=payment")),
        (headers(Some("ts=1704908010,v1=zz".into()), Some(request_id)), None),
        (headers(None, Some(request_id)), Some("data.id=123456&type=payment")),
    ] {
        assert_eq!(notify(&headers, query, body), Err(NotificationError::Unauthenticated), "{headers:?} {query:?}");
    }

    // Signed, but not about a payment: nothing to do.
    let order = br#"{"action":"topic_merchant_order_wh","type":"topic_merchant_order_wh","data":{"id":"77"}}"#;
    let order_signature =
        format!("ts={ts},v1={}", sign(WEBHOOK_SECRET, &format!("id:77;request-id:{request_id};ts:{ts};")));
    assert_eq!(notify(&headers(Some(order_signature), Some(request_id)), None, order).unwrap(), vec![]);

    let settings = fake.settings();
    let unconfigured = MercadoPagoGateway::new(
        &settings,
        &MapSecrets(HashMap::from([("MP_ACCESS_TOKEN".to_owned(), ACCESS_TOKEN.to_owned())])),
    )
    .unwrap();
    let request = WebhookRequest {
        headers: &headers(Some(good), Some(request_id)),
        query: Some("data.id=123456&type=payment"),
        path_secret: None,
        body,
    };
    assert_eq!(unconfigured.notifications(&request), Err(NotificationError::Unauthenticated));
}
