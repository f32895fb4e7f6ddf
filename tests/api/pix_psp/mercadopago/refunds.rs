//! Mercado Pago refunds against the loopback fake: keyed by the refund's id, so a POST sent again
//! returns the refund already made.

use balcao::pix::mercadopago::MercadoPagoGateway;
use balcao::pix::{
    ChargeRef, GatewayError, Notification, NotifiedCharge, PaymentState, PixGateway, RefundReceipt, RefundRequest,
    RefundState, WebhookRequest,
};
use serde_json::{Value, json};

use super::super::{SHORT_TIMEOUT, charge_ref, refund, request};
use super::{headers, in_a_day, sign};
use crate::support::fake_mercadopago::{ACCESS_TOKEN, FIRST_REFUND_ID, FakeMercadoPago, Fault, Route, WEBHOOK_SECRET};

/// A charge of `cents` created through `gateway` and approved: its reference and payment id.
async fn approved(fake: &FakeMercadoPago, gateway: &MercadoPagoGateway, key: &str, cents: i64) -> (ChargeRef, String) {
    let created = gateway.create(&request(key, cents, in_a_day())).await.unwrap();
    let id = created.provider_ref.clone().unwrap();
    fake.update(&id, json!({ "status": "approved", "status_detail": "accredited" }));
    (charge_ref(&created), id)
}

fn receipt(state: RefundState, n: u64) -> RefundReceipt {
    RefundReceipt { state, provider_ref: Some((FIRST_REFUND_ID + n).to_string()) }
}

/// `req` once its refund's id is known, as the caller records it.
fn known(req: &RefundRequest, made: &RefundReceipt) -> RefundRequest {
    RefundRequest { provider_ref: made.provider_ref.clone(), ..req.clone() }
}

/// A refund POST sent as is, without our client.
async fn raw_post(fake: &FakeMercadoPago, payment: &str, key: Option<&str>, body: Value) -> (u16, Value) {
    let mut post = reqwest::Client::new()
        .post(format!("{}/v1/payments/{payment}/refunds", fake.loopback.url))
        .bearer_auth(ACCESS_TOKEN)
        .json(&body);
    if let Some(key) = key {
        post = post.header("X-Idempotency-Key", key);
    }
    let answer = post.send().await.unwrap();
    (answer.status().as_u16(), answer.json().await.unwrap())
}

#[tokio::test]
async fn mercadopago_refunds_a_payment_in_full_and_it_still_reads_paid() {
    let fake = FakeMercadoPago::start().await;
    let gateway = fake.gateway();
    let (charge, id) = approved(&fake, &gateway, "charge/v1/refund-full", 4550).await;
    let req = refund("refund/v1/full", &charge, 4550);

    let made = gateway.refund(&req).await.unwrap();
    assert_eq!(made, receipt(RefundState::Done, 1));
    let post = &fake.refund_posts()[0];
    assert_eq!(post.idempotency_key.as_deref(), Some(req.id.as_str()));
    assert_eq!(post.authorization.as_deref(), Some(format!("Bearer {ACCESS_TOKEN}").as_str()));
    assert_eq!(post.body, json!({ "amount": 45.5 }));
    assert_eq!(fake.refunds_of(&id).len(), 1);
    assert_eq!(fake.payments()[0]["status"], "refunded");

    assert_eq!(gateway.state(&charge).await.unwrap(), PaymentState::Paid { end_to_end_id: None });
    let by_reference = ChargeRef { provider_ref: None, ..charge };
    assert_eq!(gateway.state(&by_reference).await.unwrap(), PaymentState::Paid { end_to_end_id: None });
    assert_eq!(gateway.find_refund(&known(&req, &made)).await.unwrap(), Some(made.clone()));
    let by_reference = RefundRequest { charge: by_reference, ..known(&req, &made) };
    assert_eq!(gateway.find_refund(&by_reference).await.unwrap(), Some(made));
}

#[tokio::test]
async fn mercadopago_partial_refunds_add_up_to_the_payment_and_no_further() {
    let fake = FakeMercadoPago::start().await;
    let gateway = fake.gateway();
    let (charge, id) = approved(&fake, &gateway, "charge/v1/refund-partial", 4550).await;

    assert_eq!(gateway.refund(&refund("refund/v1/part1", &charge, 2000)).await.unwrap(), receipt(RefundState::Done, 1));
    assert_eq!(fake.payments()[0]["status_detail"], "partially_refunded");
    assert_eq!(gateway.state(&charge).await.unwrap(), PaymentState::Paid { end_to_end_id: None });
    assert_eq!(gateway.refund(&refund("refund/v1/part2", &charge, 2550)).await.unwrap(), receipt(RefundState::Done, 2));
    let excess = gateway.refund(&refund("refund/v1/part3", &charge, 1)).await.unwrap_err();
    assert!(
        matches!(&excess, GatewayError::Rejected(m) if m.contains("not-valid-for-the-current-payment-state")),
        "{excess:?}"
    );
    let amounts: Vec<_> = fake.refunds_of(&id).iter().map(|r| r["amount"].clone()).collect();
    assert_eq!(amounts, [json!(20.0), json!(25.5)]);

    let (other, other_id) = approved(&fake, &gateway, "charge/v1/refund-over", 1000).await;
    let over = gateway.refund(&refund("refund/v1/over", &other, 1001)).await.unwrap_err();
    assert!(matches!(&over, GatewayError::Rejected(m) if m.contains("Invalid refund amount")), "{over:?}");
    assert!(fake.refunds_of(&other_id).is_empty());
}

#[tokio::test]
async fn mercadopago_the_same_refund_twice_is_one_refund() {
    let fake = FakeMercadoPago::start().await;
    let gateway = fake.gateway();
    let (charge, id) = approved(&fake, &gateway, "charge/v1/refund-twice", 4550).await;
    let req = refund("refund/v1/twice", &charge, 1000);

    let first = gateway.refund(&req).await.unwrap();
    assert_eq!(gateway.refund(&req).await.unwrap(), first, "the key replays the same refund");
    assert_eq!(fake.refunds_of(&id).len(), 1);
    let keys: Vec<_> = fake.refund_posts().into_iter().map(|p| p.idempotency_key).collect();
    assert_eq!(keys, [Some(req.id.to_string()), Some(req.id.to_string())]);
}

#[tokio::test]
async fn mercadopago_a_refund_whose_answer_was_lost_is_made_once() {
    let fake = FakeMercadoPago::start().await;
    let gateway = fake.gateway().with_timeout(SHORT_TIMEOUT).unwrap();
    let (charge, id) = approved(&fake, &gateway, "charge/v1/refund-lost", 4550).await;
    let req = refund("refund/v1/lost", &charge, 4550);
    fake.fail(Route::CreateRefund, Fault::ActThenHang);

    let error = gateway.refund(&req).await.unwrap_err();
    assert!(matches!(&error, GatewayError::Unknown(m) if m.contains("timed out")), "{error:?}");
    assert_eq!(fake.refunds_of(&id).len(), 1, "Mercado Pago did make it");
    // Without the refund's id there is nothing to look up; the key makes sending again safe.
    assert_eq!(gateway.find_refund(&req).await.unwrap(), None);
    let made = gateway.refund(&req).await.unwrap();
    assert_eq!(made, receipt(RefundState::Done, 1));
    assert_eq!(fake.refunds_of(&id).len(), 1, "no second refund");
    assert_eq!(gateway.find_refund(&known(&req, &made)).await.unwrap(), Some(made));
}

#[tokio::test]
async fn mercadopago_a_409_for_a_refund_key_in_flight_is_unknown() {
    let fake = FakeMercadoPago::start().await;
    let gateway = fake.gateway().with_timeout(SHORT_TIMEOUT).unwrap();
    let (charge, id) = approved(&fake, &gateway, "charge/v1/refund-held", 4550).await;
    let req = refund("refund/v1/held", &charge, 4550);
    fake.fail(Route::CreateRefund, Fault::HoldUntilReleased);

    let error = gateway.refund(&req).await.unwrap_err();
    assert!(matches!(&error, GatewayError::Unknown(m) if m.contains("timed out")), "{error:?}");
    let error = gateway.refund(&req).await.unwrap_err();
    assert!(matches!(&error, GatewayError::Unknown(m) if m.contains("409")), "in flight, not refused: {error:?}");
    assert!(fake.refunds_of(&id).is_empty());

    fake.release();
    for _ in 0..200 {
        if !fake.refunds_of(&id).is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(gateway.refund(&req).await.unwrap(), receipt(RefundState::Done, 1));
    assert_eq!(fake.refunds_of(&id).len(), 1, "one refund for one key");
}

#[tokio::test]
async fn mercadopago_find_refund_of_an_unknown_id_is_none() {
    let fake = FakeMercadoPago::start().await;
    let gateway = fake.gateway();
    let (charge, _) = approved(&fake, &gateway, "charge/v1/refund-unknown", 4550).await;
    let req = refund("refund/v1/never", &charge, 1000);
    assert_eq!(gateway.find_refund(&req).await.unwrap(), None);
    let unknown = RefundRequest { provider_ref: Some((FIRST_REFUND_ID + 99).to_string()), ..req };
    assert_eq!(gateway.find_refund(&unknown).await.unwrap(), None);
}

#[tokio::test]
async fn mercadopago_a_refund_in_contingency_is_processing_until_the_poll_sees_it_done() {
    let fake = FakeMercadoPago::start().await;
    fake.refunds_in_contingency();
    let gateway = fake.gateway();
    let (charge, id) = approved(&fake, &gateway, "charge/v1/refund-contingency", 4550).await;
    let req = refund("refund/v1/contingency", &charge, 4550);

    let made = gateway.refund(&req).await.unwrap();
    assert_eq!(made, receipt(RefundState::Processing, 1), "201 in_process, not a 400");
    assert_eq!(fake.payments()[0]["status"], "approved", "not refunded yet");
    let req = known(&req, &made);
    assert_eq!(gateway.find_refund(&req).await.unwrap(), Some(made));
    fake.settle_refund(&(FIRST_REFUND_ID + 1).to_string(), "approved");
    assert_eq!(gateway.find_refund(&req).await.unwrap(), Some(receipt(RefundState::Done, 1)));
    assert_eq!(gateway.state(&charge).await.unwrap(), PaymentState::Paid { end_to_end_id: None });

    // Without X-Render-In-Process-Refunds the same situation reads as a refusal.
    let (_, other) = approved(&fake, &gateway, "charge/v1/refund-contingency-raw", 1000).await;
    let (status, _) = raw_post(&fake, &other, Some("raw-key-1"), json!({ "amount": 10 })).await;
    assert_eq!(status, 400);
    assert_eq!(fake.refunds_of(&other)[0]["status"], "in_process", "yet the refund exists");
    assert_eq!(fake.refunds_of(&id).len(), 1);
}

#[tokio::test]
async fn mercadopago_refuses_a_refund_without_key_of_an_unpaid_payment_or_of_a_bad_amount() {
    let fake = FakeMercadoPago::start().await;
    let gateway = fake.gateway();
    let created = gateway.create(&request("charge/v1/refund-unpaid", 4550, in_a_day())).await.unwrap();
    let id = created.provider_ref.clone().unwrap();

    let unpaid = gateway.refund(&refund("refund/v1/unpaid", &charge_ref(&created), 4550)).await.unwrap_err();
    assert!(matches!(&unpaid, GatewayError::Rejected(m) if m.contains("current-payment-state")), "{unpaid:?}");
    let missing = ChargeRef { txid: "nosuchtxid".into(), provider_ref: Some("1".into()) };
    let missing = gateway.refund(&refund("refund/v1/missing", &missing, 100)).await.unwrap_err();
    assert!(matches!(&missing, GatewayError::Rejected(m) if m.contains("Payment-not-found")), "{missing:?}");

    // What Mercado Pago answers to requests we never send.
    fake.update(&id, json!({ "status": "approved", "status_detail": "accredited" }));
    let (status, body) = raw_post(&fake, &id, None, json!({ "amount": 10 })).await;
    assert_eq!((status, body["cause"][0]["code"].clone()), (400, json!(4292)), "{body}");
    for (amount, code) in [(json!("12.34"), 4041), (json!(-1), 4040), (json!(0), 4040), (json!(1.234), 4041)] {
        let (status, body) = raw_post(&fake, &id, Some(&format!("raw-{amount}")), json!({ "amount": amount })).await;
        assert_eq!((status, body["cause"][0]["code"].clone()), (400, json!(code)), "{amount}: {body}");
    }
    assert!(fake.refunds_of(&id).is_empty());
}

#[tokio::test]
async fn mercadopago_a_refund_notification_is_a_payment_event_of_its_own() {
    let fake = FakeMercadoPago::start().await;
    let gateway = fake.gateway();
    let ts = "1704908010";
    let read = |notification_id: u64, action: &str, request_id: &str| {
        let signature = sign(WEBHOOK_SECRET, &format!("id:123456;request-id:{request_id};ts:{ts};"));
        let body = json!({ "id": notification_id, "live_mode": true, "type": "payment", "api_version": "v1",
                           "action": action, "data": { "id": "123456" } })
        .to_string();
        let headers = headers(Some(format!("ts={ts},v1={signature}")), Some(request_id));
        gateway.notifications(&WebhookRequest {
            headers: &headers,
            query: Some("data.id=123456&type=payment"),
            path_secret: None,
            body: body.as_bytes(),
        })
    };
    let paid = read(12345, "payment.updated", "req-paid").unwrap();
    let refunded = read(12346, "payment.updated", "req-refund").unwrap();
    let charge = NotifiedCharge::ProviderRef("123456".into());
    assert_eq!(paid, vec![Notification { event_id: "12345".into(), charge: charge.clone() }]);
    assert_eq!(refunded, vec![Notification { event_id: "12346".into(), charge }]);
}
