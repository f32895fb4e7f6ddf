//! The Asaas gateway against its loopback fake.

mod refunds;

use std::collections::HashMap;

use balcao::domain::Cents;
use balcao::pix::asaas::AsaasGateway;
use balcao::pix::gateways::build;
use balcao::pix::{
    CancelOutcome, ChargeRef, GatewayError, MapSecrets, Notification, NotificationError, NotifiedCharge, PaymentState,
    PixGateway, WebhookRequest, decode,
};
use chrono::{TimeZone, Utc};
use reqwest::header::HeaderMap as ReqwestHeaders;
use serde_json::json;

use super::{SHORT_TIMEOUT, request};
use crate::support::fake_asaas::{API_KEY, FakeAsaas, Fault, Route, WEBHOOK_TOKEN};

/// 2030-01-02 02:00 UTC is still 2030-01-01 in Brasília.
fn expires_at() -> chrono::DateTime<Utc> {
    Utc.with_ymd_and_hms(2030, 1, 2, 2, 0, 0).unwrap()
}

#[tokio::test]
async fn asaas_creates_a_customer_a_payment_and_returns_its_code() {
    let fake = FakeAsaas::start().await;
    let secrets = MapSecrets(HashMap::from([("ASAAS_API_KEY".to_owned(), API_KEY.to_owned())]));
    let gateway = build(&fake.settings(), &secrets).unwrap();
    assert_eq!(gateway.name(), "asaas");
    let req = request("charge/v1/first", 4550, expires_at());

    let created = gateway.create(&req).await.unwrap();

    let payments = fake.payments();
    assert_eq!(payments.len(), 1);
    let payment = &payments[0];
    assert_eq!(created.provider_ref.as_deref(), payment["id"].as_str());
    assert_eq!(created.copia_e_cola, fake.code_of(payment["id"].as_str().unwrap()));
    assert_eq!(decode(&created.copia_e_cola).unwrap().amount(), Some(Cents(4550)));
    assert_eq!((&created.txid, created.expires_at), (&req.txid, req.expires_at));
    assert_eq!(payment["billingType"], "PIX");
    assert_eq!(payment["value"], json!(45.5));
    assert_eq!(payment["dueDate"], "2030-01-01");
    assert_eq!(payment["description"], "Corte de cabelo");
    assert_eq!(payment["externalReference"], req.txid.as_str());
    let customers = fake.customers();
    assert_eq!(customers.len(), 1);
    assert_eq!(payment["customer"], customers[0]["id"]);
    assert_eq!(customers[0]["name"], "Maria");
    assert_eq!(customers[0]["mobilePhone"], "11999990000");
    assert_eq!(customers[0]["externalReference"], "wa:551199990000", "the number without its ninth digit");
    assert_eq!(customers[0]["notificationDisabled"], true);
    assert_eq!(customers[0]["cpfCnpj"], "52998224725", "the payer's CPF, compact");
    let routes: Vec<Route> = fake.seen().iter().map(|s| s.route).collect();
    assert_eq!(
        routes,
        [Route::ListPayments, Route::ListCustomers, Route::CreateCustomer, Route::CreatePayment, Route::PixQrCode],
        "the lookup comes before the create"
    );
    for seen in fake.seen() {
        assert_eq!(seen.access_token.as_deref(), Some(API_KEY), "{seen:?}");
        assert!(seen.user_agent.as_deref().is_some_and(|ua| ua.starts_with("balcao/")), "{seen:?}");
    }

    // The same key again: the existing payment. Another key for the same phone: one customer.
    assert_eq!(gateway.create(&req).await.unwrap(), created);
    assert_eq!(gateway.find(&req).await.unwrap(), Some(created.clone()));
    let other = gateway.create(&request("charge/v1/second", 1000, expires_at())).await.unwrap();
    assert_ne!(other.copia_e_cola, created.copia_e_cola);
    assert_eq!((fake.payments().len(), fake.customers().len()), (2, 1));
    assert_eq!(gateway.find(&request("charge/v1/never", 1000, expires_at())).await.unwrap(), None);
}

#[tokio::test]
async fn asaas_without_the_payers_document_sends_nothing() {
    let fake = FakeAsaas::start().await;
    let mut req = request("charge/v1/no-document", 4550, expires_at());
    req.payer.document = None;
    let error = fake.gateway().create(&req).await.unwrap_err();
    assert!(matches!(&error, GatewayError::Rejected(m) if m.contains("CPF or CNPJ")), "{error:?}");
    let created =
        fake.seen().iter().filter(|s| matches!(s.route, Route::CreateCustomer | Route::CreatePayment)).count();
    assert_eq!(created, 0, "nothing created at Asaas");
}

#[tokio::test]
async fn asaas_refuses_a_payment_for_a_customer_without_a_document_so_it_is_updated_first() {
    let fake = FakeAsaas::start().await;
    // A customer made before documents were sent: Asaas refuses to charge them.
    fake.add_customer(json!({ "object": "customer", "id": "cus_old", "name": "Maria", "deleted": false,
                               "externalReference": "wa:551199990000", "cpfCnpj": null }));
    let refused = fake.customers()[0].clone();
    let error = fake
        .gateway()
        .create(&request("charge/v1/direct", 4550, expires_at()))
        .await
        .map(|_| ())
        .err()
        .map(|e| e.to_string());
    assert_eq!(error, None, "the customer was updated before the payment");
    let customers = fake.customers();
    assert_eq!(customers.len(), 1, "the same customer, updated: {customers:?}");
    assert_eq!(
        (customers[0]["id"].clone(), customers[0]["cpfCnpj"].clone()),
        (refused["id"].clone(), json!("52998224725"))
    );
    let routes: Vec<Route> = fake.seen().iter().map(|s| s.route).collect();
    assert!(routes.contains(&Route::UpdateCustomer), "{routes:?}");

    // What the update prevents, as Asaas answers it.
    fake.add_customer(json!({ "object": "customer", "id": "cus_bare", "name": "Zé", "deleted": false,
                               "externalReference": "manual", "cpfCnpj": null }));
    let body = json!({ "customer": "cus_bare", "billingType": "PIX", "value": 10.0, "dueDate": "2030-01-01" });
    let answer = reqwest::Client::new()
        .post(format!("{}/v3/payments", fake.loopback.url))
        .header("access_token", API_KEY)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 400);
    let text = answer.text().await.unwrap();
    assert!(text.contains("necessário preencher o CPF ou CNPJ do cliente"), "{text}");
}

#[tokio::test]
async fn asaas_cancel_deletes_a_pending_payment_and_reports_one_paid_meanwhile() {
    let fake = FakeAsaas::start().await;
    let gateway = fake.gateway();
    let created = gateway.create(&request("charge/v1/cancel", 4550, expires_at())).await.unwrap();
    let charge = ChargeRef { txid: created.txid.as_str().to_owned(), provider_ref: created.provider_ref.clone() };
    assert_eq!(gateway.cancel(&charge).await.unwrap(), CancelOutcome::Cancelled);
    assert_eq!(fake.payments()[0]["deleted"], true);
    assert_eq!(gateway.cancel(&charge).await.unwrap(), CancelOutcome::Cancelled, "deleted already: still cancelled");
    let by_reference = ChargeRef { provider_ref: None, ..charge };
    assert_eq!(gateway.cancel(&by_reference).await.unwrap(), CancelOutcome::Cancelled);

    let paid = gateway.create(&request("charge/v1/cancel-paid", 4550, expires_at())).await.unwrap();
    let id = paid.provider_ref.clone().unwrap();
    fake.update(&id, json!({ "status": "RECEIVED" }));
    let paid = ChargeRef { txid: paid.txid.as_str().to_owned(), provider_ref: Some(id.clone()) };
    assert_eq!(gateway.cancel(&paid).await.unwrap(), CancelOutcome::Paid { end_to_end_id: None });
    assert!(fake.payments().iter().any(|p| p["id"] == id.as_str() && p["deleted"] == false), "not removed");
}

#[tokio::test]
async fn asaas_server_error_is_unknown_then_lookup_then_one_payment() {
    let fake = FakeAsaas::start().await;
    let gateway = fake.gateway();
    let req = request("charge/v1/5xx", 4550, expires_at());
    fake.fail(
        Route::CreatePayment,
        Fault::Respond(503, json!({ "errors": [{ "code": "unavailable", "description": "Serviço indisponível" }] })),
    );

    let error = gateway.create(&req).await.unwrap_err();
    assert!(matches!(&error, GatewayError::Unknown(m) if m.contains("Serviço indisponível")), "{error:?}");
    assert_eq!(gateway.find(&req).await.unwrap(), None);
    let created = gateway.create(&req).await.unwrap();

    assert_eq!(fake.payments().len(), 1);
    assert_eq!(created.provider_ref.as_deref(), fake.payments()[0]["id"].as_str());
}

#[tokio::test]
async fn asaas_timeout_after_the_payment_was_created_is_found_not_created_again() {
    let fake = FakeAsaas::start().await;
    let gateway = fake.gateway().with_timeout(SHORT_TIMEOUT).unwrap();
    let req = request("charge/v1/timeout", 4550, expires_at());
    fake.fail(Route::CreatePayment, Fault::ActThenHang);

    let error = gateway.create(&req).await.unwrap_err();
    assert!(matches!(&error, GatewayError::Unknown(m) if m.contains("timed out")), "{error:?}");
    assert_eq!(fake.payments().len(), 1, "the provider did create it");

    let found = gateway.find(&req).await.unwrap().expect("the payment the timed-out call created");
    let id = fake.payments()[0]["id"].as_str().unwrap().to_owned();
    assert_eq!(found.provider_ref.as_deref(), Some(id.as_str()));
    assert_eq!(found.copia_e_cola, fake.code_of(&id));
    decode(&found.copia_e_cola).unwrap();
    // A create that skips the lookup still finds it first.
    assert_eq!(gateway.create(&req).await.unwrap(), found);
    assert_eq!(fake.payments().len(), 1);
}

/// A worker frozen past its lease wakes up with a closed window: it posts no payment (another
/// attempt may own the charge by then), and says nothing was sent.
#[tokio::test]
async fn asaas_posts_no_payment_once_the_lease_window_closed() {
    let fake = FakeAsaas::start().await;
    let gateway = fake.gateway().with_timeout(SHORT_TIMEOUT).unwrap();
    let lease = std::time::Duration::from_secs(3);
    let taken = std::time::Instant::now().checked_sub(lease).expect("an uptime of seconds");
    let req = balcao::pix::ChargeRequest {
        window: balcao::domain::SendWindow::for_lease(taken, lease),
        ..request("charge/v1/frozen", 4550, expires_at())
    };

    let error = gateway.create(&req).await.unwrap_err();
    assert!(matches!(error, GatewayError::WindowClosed), "{error:?}");
    assert!(fake.seen().iter().all(|s| s.route != Route::CreatePayment), "no payment was posted");
    assert_eq!(fake.payments().len(), 0);
    // What an attempt that takes over waits out before its lookup: the request's timeout and
    // the margin for a slow Asaas.
    assert_eq!(gateway.late_create_window(), Some(SHORT_TIMEOUT + std::time::Duration::from_secs(30)));
}

#[tokio::test]
async fn asaas_connection_reset_is_unknown() {
    let fake = FakeAsaas::start().await;
    let gateway = fake.gateway();
    let req = request("charge/v1/reset", 4550, expires_at());
    fake.loopback.reset_next("POST /v3/payments");

    let error = gateway.create(&req).await.unwrap_err();
    assert!(matches!(&error, GatewayError::Unknown(m) if m.contains("broke off")), "{error:?}");
    assert_eq!(fake.payments().len(), 0);
    assert_eq!(gateway.find(&req).await.unwrap(), None);
    gateway.create(&req).await.unwrap();
    assert_eq!((fake.payments().len(), fake.customers().len()), (1, 1));
}

#[tokio::test]
async fn asaas_validation_error_is_rejected_with_its_description() {
    let fake = FakeAsaas::start().await;
    let past = Utc.with_ymd_and_hms(2020, 1, 2, 12, 0, 0).unwrap();
    let error = fake.gateway().create(&request("charge/v1/past", 4550, past)).await.unwrap_err();
    assert!(
        matches!(&error, GatewayError::Rejected(m) if m.contains("A data de vencimento não pode ser anterior à data atual.")),
        "{error:?}"
    );
    assert_eq!(fake.payments().len(), 0);
}

#[tokio::test]
async fn asaas_wrong_key_is_unauthorized() {
    let fake = FakeAsaas::start().await;
    let error =
        fake.gateway_with("$aact_wrong").create(&request("charge/v1/key", 4550, expires_at())).await.unwrap_err();
    assert!(matches!(error, GatewayError::Unauthorized(_)), "{error:?}");
    let missing = AsaasGateway::new(&fake.settings(), &MapSecrets::default()).err().expect("no key, no gateway");
    assert!(matches!(missing, GatewayError::NotConfigured(m) if m.contains("ASAAS_API_KEY")));
}

#[tokio::test]
async fn asaas_states_follow_the_payment_status() {
    let fake = FakeAsaas::start().await;
    let gateway = fake.gateway();
    let req = request("charge/v1/state", 4550, expires_at());
    let created = gateway.create(&req).await.unwrap();
    let id = created.provider_ref.clone().unwrap();
    let by_id = ChargeRef { txid: req.txid.as_str().to_owned(), provider_ref: Some(id.clone()) };
    let by_reference = ChargeRef { provider_ref: None, ..by_id.clone() };

    assert_eq!(gateway.state(&by_id).await.unwrap(), PaymentState::Pending);
    for (status, expected) in [
        ("RECEIVED", PaymentState::Paid { end_to_end_id: None }),
        ("CONFIRMED", PaymentState::Paid { end_to_end_id: None }),
        ("OVERDUE", PaymentState::Expired),
        // Refunded: the money was received, the refund is tracked on its own.
        ("REFUNDED", PaymentState::Paid { end_to_end_id: None }),
        ("REFUND_REQUESTED", PaymentState::Paid { end_to_end_id: None }),
        ("PENDING", PaymentState::Pending),
    ] {
        fake.update(&id, json!({ "status": status }));
        assert_eq!(gateway.state(&by_id).await.unwrap(), expected, "{status}");
        assert_eq!(gateway.state(&by_reference).await.unwrap(), expected, "{status} by externalReference");
    }
    fake.update(&id, json!({ "deleted": true }));
    assert_eq!(gateway.state(&by_id).await.unwrap(), PaymentState::Cancelled);
    let unknown = ChargeRef { txid: "nosuchtxid".into(), provider_ref: Some("pay_404".into()) };
    assert!(matches!(gateway.state(&unknown).await, Err(GatewayError::Rejected(m)) if m.contains("não encontrada")));
}

#[tokio::test]
async fn asaas_notifications_need_the_webhook_token() {
    let fake = FakeAsaas::start().await;
    let gateway = fake.gateway();
    let body = br#"{ "id": "evt_05b708f961d739ea7eba7e4db318f621&368604920", "event": "PAYMENT_RECEIVED",
        "dateCreated": "2024-06-12 16:45:03", "payment": { "object": "payment", "id": "pay_080225913252", "status": "RECEIVED" } }"#;
    let with_token = |token: Option<&str>| {
        let mut headers = ReqwestHeaders::new();
        if let Some(token) = token {
            headers.insert("asaas-access-token", token.parse().unwrap());
        }
        headers
    };
    let notify = |gateway: &AsaasGateway, headers: &ReqwestHeaders, body: &[u8]| {
        gateway.notifications(&WebhookRequest { headers, query: None, path_secret: None, body })
    };

    let good = with_token(Some(WEBHOOK_TOKEN));
    assert_eq!(
        notify(&gateway, &good, body).unwrap(),
        vec![Notification {
            event_id: "evt_05b708f961d739ea7eba7e4db318f621&368604920".into(),
            charge: NotifiedCharge::ProviderRef("pay_080225913252".into()),
        }]
    );
    let other_event = br#"{ "id": "evt_2", "event": "TRANSFER_CREATED", "transfer": { "id": "tra_1" } }"#;
    assert_eq!(notify(&gateway, &good, other_event).unwrap(), vec![]);
    assert!(matches!(notify(&gateway, &good, b"{"), Err(NotificationError::Malformed(_))));

    for forged in [with_token(Some("asaas-webhook-token-124")), with_token(Some("")), with_token(None)] {
        assert_eq!(notify(&gateway, &forged, body), Err(NotificationError::Unauthenticated));
    }
    let settings = fake.settings();
    let unconfigured =
        AsaasGateway::new(&settings, &MapSecrets(HashMap::from([("ASAAS_API_KEY".to_owned(), API_KEY.to_owned())])))
            .unwrap();
    assert_eq!(notify(&unconfigured, &good, body), Err(NotificationError::Unauthenticated));
}
