//! Bacen devoluções against the fake PSP: the devolução's id is the refund's id, so a second
//! `PUT` (which the spec refuses with `400`) finds the one the first made.

use std::time::Duration;

use balcao::pix::bacen::BacenGateway;
use balcao::pix::{
    ChargeRef, GatewayError, Notification, NotifiedCharge, PaymentState, PixGateway, RefundReceipt, RefundRequest,
    RefundState, WebhookRequest,
};
use serde_json::{Value, json};

use super::super::{charge_ref, refund};
use super::{Act, FakePsp, Pki, WEBHOOK_SECRET, gateway, problem, request, setup};

/// An end-to-end id: 32 alphanumerics.
fn e2e(n: u32) -> String {
    format!("E1234567820200909122120200{n:06}")
}

/// A charge of `cents` created and paid by Pix `e2e(n)`.
async fn paid(gateway: &BacenGateway, psp: &FakePsp, key: &str, cents: i64, n: u32) -> ChargeRef {
    let created = gateway.create(&request(key, cents)).await.expect("create");
    psp.pay(created.txid.as_str(), &e2e(n));
    charge_ref(&created)
}

fn processing(n: usize) -> RefundReceipt {
    RefundReceipt { state: RefundState::Processing, provider_ref: Some(format!("D{n:0>31}")) }
}

fn done(n: usize) -> RefundReceipt {
    RefundReceipt { state: RefundState::Done, provider_ref: Some(format!("D{n:0>31}")) }
}

#[tokio::test]
async fn pix_bacen_refunds_a_paid_charge_in_full_and_it_still_reads_paid() {
    let (pki, psp) = setup().await;
    let gateway = gateway(&pki, &psp);
    let charge = paid(&gateway, &psp, "pix_charge/v1/refund-full", 2500, 1).await;
    let req = refund("refund/v1/full", &charge, 2500);

    assert_eq!(gateway.refund(&req).await.expect("refund"), processing(1));
    let (e2eid, id, body) = psp.psp().devolucoes.puts[0].clone();
    assert_eq!((e2eid, id, body), (e2e(1), req.id.to_string(), json!({ "valor": "25.00" })));
    let paid = PaymentState::Paid { end_to_end_id: Some(e2e(1)) };
    assert_eq!(gateway.state(&charge).await.expect("state"), paid, "a refund leaves the charge paid");

    // The PSP settles it: the poll sees it done, the charge still paid.
    assert_eq!(gateway.find_refund(&req).await.expect("find"), Some(processing(1)));
    psp.settle_devolucao(req.id.as_str(), "DEVOLVIDO", None);
    assert_eq!(gateway.find_refund(&req).await.expect("find"), Some(done(1)));
    let known = RefundRequest { end_to_end_id: Some(e2e(1)), ..req };
    assert_eq!(gateway.find_refund(&known).await.expect("find by e2eid"), Some(done(1)));
    assert_eq!(gateway.state(&charge).await.expect("state"), paid);
    assert_eq!(psp.devolucoes_of(&e2e(1)).len(), 1);
}

#[tokio::test]
async fn pix_bacen_partial_devolucoes_add_up_to_the_pix_and_no_further() {
    let (pki, psp) = setup().await;
    psp.psp().devolucoes.done_at_once = true;
    let gateway = gateway(&pki, &psp);
    let charge = paid(&gateway, &psp, "pix_charge/v1/refund-partial", 2500, 2).await;

    assert_eq!(gateway.refund(&refund("refund/v1/part1", &charge, 1000)).await.expect("part 1"), done(1));
    assert_eq!(gateway.refund(&refund("refund/v1/part2", &charge, 1500)).await.expect("part 2"), done(2));
    let excess = gateway.refund(&refund("refund/v1/part3", &charge, 1)).await;
    assert!(matches!(&excess, Err(GatewayError::Rejected(m)) if m.contains("excederia")), "{excess:?}");
    let valores: Vec<Value> = psp.devolucoes_of(&e2e(2)).iter().map(|d| d["valor"].clone()).collect();
    assert_eq!(valores, [json!("10.00"), json!("15.00")]);
}

#[tokio::test]
async fn pix_bacen_the_same_refund_twice_is_one_devolucao() {
    let (pki, psp) = setup().await;
    let gateway = gateway(&pki, &psp);
    let charge = paid(&gateway, &psp, "pix_charge/v1/refund-twice", 2500, 3).await;
    let req = refund("refund/v1/twice", &charge, 1000);

    let first = gateway.refund(&req).await.expect("refund");
    // The second PUT reuses the id: refused by the PSP, then found.
    assert_eq!(gateway.refund(&req).await.expect("again"), first);
    assert_eq!((psp.devolucoes_of(&e2e(3)).len(), psp.psp().devolucoes.puts.len()), (1, 2));

    // The same id for another amount: a devolução exists under our id that is not what we asked
    // for, which is no refusal (nothing may be released) but a fact the operator must look at.
    let changed = RefundRequest { amount: balcao::domain::Cents(1100), ..req };
    let odd = gateway.refund(&changed).await;
    assert!(matches!(&odd, Err(GatewayError::Unknown(m)) if m.contains("not 11.00")), "{odd:?}");
    assert_eq!(psp.devolucoes_of(&e2e(3)).len(), 1);
}

#[tokio::test]
async fn pix_bacen_a_devolucao_whose_answer_was_lost_is_found_not_made_again() {
    let (pki, psp) = setup().await;
    let gateway = gateway(&pki, &psp);
    let charge = paid(&gateway, &psp, "pix_charge/v1/refund-lost", 2500, 4).await;
    let req = refund("refund/v1/lost", &charge, 2500);
    // The token and the charge's Pix are read with normal timeouts first; only the PUT hangs.
    assert_eq!(gateway.find_refund(&req).await.expect("find"), None);
    psp.psp().devolucoes.on_put.push_back(Act::HangAfterCreate);
    let short = gateway.with_timeouts(Duration::from_secs(10), Duration::from_secs(1)).expect("short timeouts");

    let lost = short.refund(&req).await;
    assert!(matches!(&lost, Err(GatewayError::Unknown(m)) if m.contains("no answer in time")), "{lost:?}");
    let gateway = short.with_timeouts(Duration::from_secs(10), Duration::from_secs(30)).expect("normal timeouts");
    assert_eq!(gateway.find_refund(&req).await.expect("find"), Some(processing(1)));
    assert_eq!(gateway.refund(&req).await.expect("again"), processing(1));
    assert_eq!(psp.devolucoes_of(&e2e(4)).len(), 1);
}

#[tokio::test]
async fn pix_bacen_a_5xx_or_a_reset_on_a_devolucao_is_unknown_and_the_retry_makes_one() {
    let (pki, psp) = setup().await;
    let gateway = gateway(&pki, &psp);
    let charge = paid(&gateway, &psp, "pix_charge/v1/refund-5xx", 2500, 5).await;
    let req = refund("refund/v1/5xx", &charge, 2500);
    {
        let mut state = psp.psp();
        let unavailable = problem(503, "ServicoIndisponivel", "Serviço Indisponível", "Tente novamente");
        state.devolucoes.on_put.push_back(Act::Answer(503, "application/problem+json", unavailable));
        state.devolucoes.on_put.push_back(Act::Reset);
    }
    let first = gateway.refund(&req).await;
    assert!(matches!(&first, Err(GatewayError::Unknown(m)) if m.contains("ServicoIndisponivel")), "{first:?}");
    let second = gateway.refund(&req).await;
    assert!(matches!(&second, Err(GatewayError::Unknown(_))), "{second:?}");
    assert_eq!(gateway.find_refund(&req).await.expect("find"), None);
    assert_eq!(gateway.refund(&req).await.expect("refund"), processing(1));
    assert_eq!(psp.devolucoes_of(&e2e(5)).len(), 1);
}

#[tokio::test]
async fn pix_bacen_an_unpaid_charge_or_an_unknown_refund_has_no_devolucao() {
    let (pki, psp) = setup().await;
    let gateway = gateway(&pki, &psp);
    let created = gateway.create(&request("pix_charge/v1/refund-unpaid", 2500)).await.expect("create");
    let unpaid = refund("refund/v1/unpaid", &charge_ref(&created), 2500);
    let refused = gateway.refund(&unpaid).await;
    assert!(matches!(&refused, Err(GatewayError::Rejected(m)) if m.contains("not paid")), "{refused:?}");
    assert_eq!(gateway.find_refund(&unpaid).await.expect("find"), None);
    assert!(psp.psp().devolucoes.puts.is_empty(), "nothing sent");

    // A Pix the PSP does not know.
    let stranger = RefundRequest { end_to_end_id: Some(e2e(99)), ..unpaid.clone() };
    let refused = gateway.refund(&stranger).await;
    assert!(matches!(&refused, Err(GatewayError::Rejected(m)) if m.contains("404")), "{refused:?}");
    assert_eq!(gateway.find_refund(&stranger).await.expect("find"), None);
    let bad = RefundRequest { end_to_end_id: Some("E1/../cob".into()), ..unpaid };
    assert!(matches!(gateway.refund(&bad).await, Err(GatewayError::Rejected(_))));

    let charge = paid(&gateway, &psp, "pix_charge/v1/refund-other", 2500, 6).await;
    gateway.refund(&refund("refund/v1/made", &charge, 100)).await.expect("refund");
    assert_eq!(gateway.find_refund(&refund("refund/v1/never", &charge, 100)).await.expect("find"), None);
}

#[tokio::test]
async fn pix_bacen_a_devolucao_not_made_is_failed_with_its_motivo() {
    let (pki, psp) = setup().await;
    let gateway = gateway(&pki, &psp);
    let charge = paid(&gateway, &psp, "pix_charge/v1/refund-failed", 2500, 7).await;
    let req = refund("refund/v1/failed", &charge, 2500);
    gateway.refund(&req).await.expect("refund");
    psp.settle_devolucao(req.id.as_str(), "NAO_REALIZADO", Some("Negado por timeout"));
    let found = gateway.find_refund(&req).await.expect("find").expect("the devolução");
    assert_eq!(found.state, RefundState::Failed("Negado por timeout".into()));
    // Not made: its amount is free again.
    gateway.refund(&refund("refund/v1/failed-retry", &charge, 2500)).await.expect("a new devolução");
}

#[tokio::test]
async fn pix_bacen_a_token_without_pix_write_is_unauthorized() {
    let (pki, psp) = setup().await;
    psp.psp().scope = Some("cob.read cob.write pix.read".into());
    let gateway = gateway(&pki, &psp);
    let charge = paid(&gateway, &psp, "pix_charge/v1/refund-scope", 2500, 8).await;
    let refused = gateway.refund(&refund("refund/v1/scope", &charge, 2500)).await;
    assert!(matches!(&refused, Err(GatewayError::Unauthorized(m)) if m.contains("pix.write")), "{refused:?}");
    assert!(psp.devolucoes_of(&e2e(8)).is_empty());
}

#[tokio::test]
async fn pix_bacen_the_psp_refuses_a_malformed_valor() {
    let (pki, psp) = setup().await;
    let gateway = gateway(&pki, &psp);
    let _charge = paid(&gateway, &psp, "pix_charge/v1/refund-raw", 2500, 9).await;
    let client = raw_client(&pki);
    let base = psp.base_url();
    let token: Value = client
        .post(format!("{base}/oauth/token"))
        .basic_auth(super::CLIENT_ID, Some(super::CLIENT_SECRET))
        .json(&json!({ "grant_type": "client_credentials" }))
        .send()
        .await
        .expect("token")
        .json()
        .await
        .expect("token JSON");
    let bearer = token["access_token"].as_str().expect("a token").to_owned();
    for valor in [json!("25"), json!("2.5"), json!("0.00"), json!(25.0), json!("12345678901.00")] {
        let answer = client
            .put(format!("{base}/pix/{}/devolucao/raw1", e2e(9)))
            .bearer_auth(&bearer)
            .json(&json!({ "valor": valor }))
            .send()
            .await
            .expect("put");
        assert_eq!(answer.status(), 400, "{valor}");
        let body: Value = answer.json().await.expect("problem");
        assert_eq!(body["violacoes"][0]["propriedade"], "devolucao.valor", "{valor}");
    }
    assert!(psp.devolucoes_of(&e2e(9)).is_empty());
}

/// A client with our certificate, to speak to the fake PSP without the gateway.
fn raw_client(pki: &Pki) -> reqwest::Client {
    let mut pem = std::fs::read(pki.path("client.pem")).expect("cert");
    pem.extend(std::fs::read(pki.path("client.key")).expect("key"));
    let ca = reqwest::Certificate::from_pem(&std::fs::read(pki.path("ca.pem")).expect("ca")).expect("CA");
    reqwest::Client::builder()
        .identity(reqwest::Identity::from_pem(&pem).expect("identity"))
        .tls_certs_merge([ca])
        .build()
        .expect("client")
}

#[tokio::test]
async fn pix_bacen_a_callback_with_devolucoes_is_an_event_of_its_own() {
    let (pki, psp) = setup().await;
    let gateway = gateway(&pki, &psp);
    let headers = reqwest::header::HeaderMap::new();
    let read = |pix: Value| {
        let body = json!({ "pix": [pix] }).to_string();
        gateway.notifications(&WebhookRequest {
            headers: &headers,
            query: None,
            path_secret: Some(WEBHOOK_SECRET),
            body: body.as_bytes(),
        })
    };
    let txid = "971122d8f37211eaadc10242ac120002";
    let pix = |devolucoes: Option<Value>| {
        let mut pix = json!({ "endToEndId": e2e(10), "txid": txid, "valor": "110.00",
                              "horario": "2020-09-09T20:15:00.358Z" });
        if let Some(devolucoes) = devolucoes {
            pix["devolucoes"] = devolucoes;
        }
        pix
    };
    let event = |event_id: String| Ok(vec![Notification { event_id, charge: NotifiedCharge::Txid(txid.into()) }]);

    assert_eq!(read(pix(None)), event(e2e(10)));
    let devolucao = |status: &str| {
        json!([{ "id": "123ABC", "rtrId": "D1234567820200909122120200808006", "valor": "10.00",
                 "horario": { "solicitacao": "2020-09-09T20:15:00.358Z" }, "status": status }])
    };
    let processing = read(pix(Some(devolucao("EM_PROCESSAMENTO"))));
    assert_eq!(processing, event(format!("{}/devolucoes:123ABC=EM_PROCESSAMENTO", e2e(10))));
    let done = read(pix(Some(devolucao("DEVOLVIDO"))));
    assert_eq!(done, event(format!("{}/devolucoes:123ABC=DEVOLVIDO", e2e(10))));
}
