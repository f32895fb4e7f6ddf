//! Asaas refunds against the loopback fake: Asaas keeps no idempotency key, so the refund's id
//! rides in its description and the payment's `refunds` are searched for it before any POST.

use balcao::pix::asaas::AsaasGateway;
use balcao::pix::{
    ChargeRef, GatewayError, Notification, NotifiedCharge, PaymentState, PixGateway, RefundReceipt, RefundState,
    WebhookRequest,
};
use reqwest::header::HeaderMap as ReqwestHeaders;
use serde_json::json;

use super::super::{SHORT_TIMEOUT, charge_ref, refund, request};
use super::expires_at;
use crate::support::fake_asaas::{API_KEY, FakeAsaas, Fault, Route, WEBHOOK_TOKEN};

const PROCESSING: RefundReceipt = RefundReceipt { state: RefundState::Processing, provider_ref: None };
const DONE: RefundReceipt = RefundReceipt { state: RefundState::Done, provider_ref: None };

/// A charge of `cents` created through `gateway` and received at Asaas: its reference and payment id.
async fn received(fake: &FakeAsaas, gateway: &AsaasGateway, key: &str, cents: i64) -> (ChargeRef, String) {
    let created = gateway.create(&request(key, cents, expires_at())).await.unwrap();
    let id = created.provider_ref.clone().unwrap();
    fake.update(&id, json!({ "status": "RECEIVED" }));
    (charge_ref(&created), id)
}

fn refund_posts(fake: &FakeAsaas) -> usize {
    fake.seen().iter().filter(|s| s.route == Route::RefundPayment).count()
}

#[tokio::test]
async fn asaas_refunds_a_payment_in_full_and_it_still_reads_paid() {
    let fake = FakeAsaas::start().await;
    let gateway = fake.gateway();
    let (charge, id) = received(&fake, &gateway, "charge/v1/refund-full", 4550).await;
    let req = refund("refund/v1/full", &charge, 4550);

    assert_eq!(gateway.refund(&req).await.unwrap(), PROCESSING);
    let refunds = fake.refunds_of(&id);
    assert_eq!(refunds.len(), 1);
    assert_eq!(refunds[0]["value"], json!(45.5));
    assert_eq!(refunds[0]["description"], format!("Devolução {}", req.id));
    assert_eq!(fake.payments()[0]["status"], "REFUND_REQUESTED");
    assert_eq!(gateway.state(&charge).await.unwrap(), PaymentState::Paid { end_to_end_id: None });

    // Asaas settles it: the poll through find_refund sees it done.
    assert_eq!(gateway.find_refund(&req).await.unwrap(), Some(PROCESSING));
    fake.settle_refunds(&id, "DONE");
    assert_eq!(gateway.find_refund(&req).await.unwrap(), Some(DONE));
    assert_eq!(fake.payments()[0]["status"], "REFUNDED");
    assert_eq!(gateway.state(&charge).await.unwrap(), PaymentState::Paid { end_to_end_id: None });
    let by_reference = ChargeRef { provider_ref: None, ..charge };
    assert_eq!(gateway.state(&by_reference).await.unwrap(), PaymentState::Paid { end_to_end_id: None });
    assert_eq!(gateway.find_refund(&refund("refund/v1/full", &by_reference, 4550)).await.unwrap(), Some(DONE));
}

#[tokio::test]
async fn asaas_partial_refunds_add_up_to_the_payment_and_no_further() {
    let fake = FakeAsaas::start().await;
    fake.refunds_done_at_once();
    let gateway = fake.gateway();
    let (charge, id) = received(&fake, &gateway, "charge/v1/refund-partial", 4550).await;

    assert_eq!(gateway.refund(&refund("refund/v1/part1", &charge, 2000)).await.unwrap(), DONE);
    assert_eq!(fake.payments()[0]["status"], "RECEIVED", "a partial refund leaves it received");
    assert_eq!(gateway.refund(&refund("refund/v1/part2", &charge, 2550)).await.unwrap(), DONE);
    let excess = gateway.refund(&refund("refund/v1/part3", &charge, 1)).await.unwrap_err();
    assert!(matches!(&excess, GatewayError::Rejected(m) if m.contains("estornar")), "{excess:?}");
    let values: Vec<_> = fake.refunds_of(&id).iter().map(|r| r["value"].clone()).collect();
    assert_eq!(values, [json!(20.0), json!(25.5)]);
    assert_eq!(fake.payments()[0]["status"], "REFUNDED");
    assert_eq!(gateway.state(&charge).await.unwrap(), PaymentState::Paid { end_to_end_id: None });

    // A second payment: more than it is worth at once is refused by Asaas too.
    let (other, other_id) = received(&fake, &gateway, "charge/v1/refund-over", 1000).await;
    let over = gateway.refund(&refund("refund/v1/over", &other, 1001)).await.unwrap_err();
    assert!(matches!(&over, GatewayError::Rejected(m) if m.contains("excede")), "{over:?}");
    assert!(fake.refunds_of(&other_id).is_empty());
}

#[tokio::test]
async fn asaas_the_same_refund_twice_is_one_refund() {
    let fake = FakeAsaas::start().await;
    let gateway = fake.gateway();
    let (charge, id) = received(&fake, &gateway, "charge/v1/refund-twice", 4550).await;
    let req = refund("refund/v1/twice", &charge, 1000);

    let first = gateway.refund(&req).await.unwrap();
    assert_eq!(gateway.refund(&req).await.unwrap(), first);
    assert_eq!((fake.refunds_of(&id).len(), refund_posts(&fake)), (1, 1), "found before posting again");
    // Another refund of the same payment is another refund.
    gateway.refund(&refund("refund/v1/twice-other", &charge, 1000)).await.unwrap();
    assert_eq!(fake.refunds_of(&id).len(), 2);
}

#[tokio::test]
async fn asaas_a_refund_whose_answer_was_lost_is_found_and_not_made_again() {
    let fake = FakeAsaas::start().await;
    let gateway = fake.gateway().with_timeout(SHORT_TIMEOUT).unwrap();
    let (charge, id) = received(&fake, &gateway, "charge/v1/refund-lost", 4550).await;
    let req = refund("refund/v1/lost", &charge, 4550);
    fake.fail(Route::RefundPayment, Fault::ActThenHang);

    let error = gateway.refund(&req).await.unwrap_err();
    assert!(matches!(&error, GatewayError::Unknown(m) if m.contains("timed out")), "{error:?}");
    assert_eq!(fake.refunds_of(&id).len(), 1, "Asaas did make it");

    assert_eq!(gateway.find_refund(&req).await.unwrap(), Some(PROCESSING));
    assert_eq!(gateway.refund(&req).await.unwrap(), PROCESSING);
    assert_eq!((fake.refunds_of(&id).len(), refund_posts(&fake)), (1, 1), "no second refund");
}

#[tokio::test]
async fn asaas_a_5xx_refund_is_unknown_and_the_retry_makes_one() {
    let fake = FakeAsaas::start().await;
    let gateway = fake.gateway();
    let (charge, id) = received(&fake, &gateway, "charge/v1/refund-5xx", 4550).await;
    let req = refund("refund/v1/5xx", &charge, 4550);
    let unavailable = json!({ "errors": [{ "code": "unavailable", "description": "Serviço indisponível" }] });
    fake.fail(Route::RefundPayment, Fault::Respond(503, unavailable));

    let error = gateway.refund(&req).await.unwrap_err();
    assert!(matches!(&error, GatewayError::Unknown(m) if m.contains("Serviço indisponível")), "{error:?}");
    assert_eq!(gateway.find_refund(&req).await.unwrap(), None);
    assert_eq!(gateway.refund(&req).await.unwrap(), PROCESSING);
    assert_eq!(fake.refunds_of(&id).len(), 1);
}

#[tokio::test]
async fn asaas_find_refund_of_an_unknown_id_is_none() {
    let fake = FakeAsaas::start().await;
    let gateway = fake.gateway();
    let (charge, _) = received(&fake, &gateway, "charge/v1/refund-unknown", 4550).await;
    assert_eq!(gateway.find_refund(&refund("refund/v1/never", &charge, 1000)).await.unwrap(), None);
    gateway.refund(&refund("refund/v1/made", &charge, 1000)).await.unwrap();
    assert_eq!(gateway.find_refund(&refund("refund/v1/never", &charge, 1000)).await.unwrap(), None);
}

#[tokio::test]
async fn asaas_refuses_to_refund_an_unpaid_payment_or_a_malformed_value() {
    let fake = FakeAsaas::start().await;
    let gateway = fake.gateway();
    let created = gateway.create(&request("charge/v1/refund-unpaid", 4550, expires_at())).await.unwrap();
    let charge = charge_ref(&created);
    let id = created.provider_ref.clone().unwrap();

    let unpaid = gateway.refund(&refund("refund/v1/unpaid", &charge, 4550)).await.unwrap_err();
    assert!(matches!(&unpaid, GatewayError::Rejected(m) if m.contains("recebidas")), "{unpaid:?}");
    let zero = gateway.refund(&refund("refund/v1/zero", &charge, 0)).await.unwrap_err();
    assert!(matches!(&zero, GatewayError::Rejected(m) if m.contains("positive")), "{zero:?}");
    assert_eq!(refund_posts(&fake), 1, "a zero refund is not sent");

    // What Asaas answers to values we never send.
    fake.update(&id, json!({ "status": "RECEIVED" }));
    let client = reqwest::Client::new();
    for value in [json!("12.34"), json!(-1), json!(1.234)] {
        let answer = client
            .post(format!("{}/v3/payments/{id}/refund", fake.loopback.url))
            .header("access_token", API_KEY)
            .json(&json!({ "value": value, "description": "manual" }))
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 400, "{value}");
    }
    assert!(fake.refunds_of(&id).is_empty());
}

/// A worker frozen past its lease wakes up with a closed window: it posts no refund.
#[tokio::test]
async fn asaas_posts_no_refund_once_the_lease_window_closed() {
    let fake = FakeAsaas::start().await;
    let gateway = fake.gateway();
    let (charge, id) = received(&fake, &gateway, "charge/v1/refund-frozen", 4550).await;
    let lease = std::time::Duration::from_secs(3);
    let taken = std::time::Instant::now().checked_sub(lease).expect("an uptime of seconds");
    let req = balcao::pix::RefundRequest {
        window: balcao::domain::SendWindow::for_lease(taken, lease),
        ..refund("refund/v1/frozen", &charge, 4550)
    };

    assert!(matches!(gateway.refund(&req).await, Err(GatewayError::WindowClosed)));
    assert_eq!((refund_posts(&fake), fake.refunds_of(&id).len()), (0, 0));
}

#[tokio::test]
async fn asaas_an_answer_without_the_refund_list_is_read_from_the_payment_status() {
    let fake = FakeAsaas::start().await;
    fake.answer_refunds_without_the_list();
    let gateway = fake.gateway();
    let (charge, _) = received(&fake, &gateway, "charge/v1/refund-nolist", 4550).await;
    assert_eq!(gateway.refund(&refund("refund/v1/nolist", &charge, 4550)).await.unwrap(), PROCESSING);

    // Even a payment REFUNDED reads processing until a lookup lists ours as done.
    fake.refunds_done_at_once();
    let (charge, _) = received(&fake, &gateway, "charge/v1/refund-nolist-done", 4550).await;
    let req = refund("refund/v1/nolist-done", &charge, 4550);
    assert_eq!(gateway.refund(&req).await.unwrap(), PROCESSING);
    assert_eq!(gateway.find_refund(&req).await.unwrap(), Some(DONE));

    // A partial refund leaves the payment received: nothing says what became of it.
    let (charge, _) = received(&fake, &gateway, "charge/v1/refund-nolist-part", 4550).await;
    let unknown = gateway.refund(&refund("refund/v1/nolist-part", &charge, 100)).await.unwrap_err();
    assert!(matches!(unknown, GatewayError::Unknown(_)), "{unknown:?}");
}

#[tokio::test]
async fn asaas_refund_events_are_notifications_for_the_charge() {
    let fake = FakeAsaas::start().await;
    let gateway = fake.gateway();
    let mut headers = ReqwestHeaders::new();
    headers.insert("asaas-access-token", WEBHOOK_TOKEN.parse().unwrap());
    let events = ["PAYMENT_RECEIVED", "PAYMENT_REFUND_IN_PROGRESS", "PAYMENT_PARTIALLY_REFUNDED", "PAYMENT_REFUNDED"];
    let mut ids = Vec::new();
    for (n, event) in events.into_iter().enumerate() {
        let body = json!({ "id": format!("evt_{n}&368604920"), "event": event, "dateCreated": "2024-06-12 16:45:03",
                           "payment": { "object": "payment", "id": "pay_080225913252", "status": "RECEIVED" } })
        .to_string();
        let read = gateway
            .notifications(&WebhookRequest { headers: &headers, query: None, path_secret: None, body: body.as_bytes() })
            .unwrap();
        assert_eq!(
            read,
            vec![Notification {
                event_id: format!("evt_{n}&368604920"),
                charge: NotifiedCharge::ProviderRef("pay_080225913252".into()),
            }],
            "{event}"
        );
        ids.push(read[0].event_id.clone());
    }
    ids.dedup();
    assert_eq!(ids.len(), events.len(), "each event keeps its own id");
}
