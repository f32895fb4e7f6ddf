//! The payer's CPF or CNPJ on a gateway that requires it (Asaas), on both databases: the staff
//! menu asks for it once per customer, the merchant's agent is told it is missing, a deposit
//! asks the customer for it before its charge, and it is exported and erased with the contact.

use std::sync::Arc;

use balcao::domain::{Cents, PayerDocument, TenantId};
use balcao::ledger::Outcome;
use balcao::money::deposits::DepositRequests;
use balcao::pix::Gateways;
use balcao::store::{ChargeStore, InboundStore, PrivacyStore};
use chrono::{TimeDelta, Utc};
use serde_json::json;

use crate::contract;
use crate::support::clicks::{CUSTOMER, PAYER_DOCUMENT, button, inbox, post, propose_charge};
use crate::support::common::TestDb;
use crate::support::fake_asaas::FakeAsaas;
use crate::support::payloads::text;
use crate::support::scenario::{
    LEASE, STAFF, Scenario, app_on_asaas, asaas_file, asaas_secrets, local_replier, next_weekday_at_14h,
};

/// The CPF as Asaas receives it.
const COMPACT: &str = "52998224725";

async fn asked(db: &TestDb, tenant: TenantId, wa_id: &str, needle: &str) -> usize {
    inbox(db, tenant, wa_id).await.iter().filter(|m| m.body().contains(needle)).count()
}

async fn document_of(db: &TestDb, tenant: TenantId, wa_id: &str) -> Option<PayerDocument> {
    let phone = balcao::domain::PhoneE164::parse(wa_id).unwrap();
    db.store.payer_document_of_phone(tenant, &phone).await.unwrap()
}

contract!(the_staff_menu_asks_for_the_customers_cpf_once, |db| async move {
    let fake = FakeAsaas::start().await;
    let s = Scenario::from_file(db, &asaas_file(&fake)).await;
    let app = app_on_asaas(db).await;
    post(&app, CUSTOMER, text("wamid.d.0", CUSTOMER, "oi")).await;
    app.drain_turns().await;

    let confirm = propose_charge(db, &app, &s, "d1").await;
    assert_eq!(asked(db, s.tenant.id, STAFF, "CPF ou CNPJ do cliente").await, 1);
    post(&app, STAFF, button(STAFF, "wamid.d1.click", &confirm)).await;
    app.drain_turns().await;
    let customers = fake.customers();
    assert_eq!((fake.payments().len(), customers.len()), (1, 1), "{customers:?}");
    assert_eq!(customers[0]["cpfCnpj"], COMPACT, "Asaas's customer carries the CPF");
    assert_eq!(document_of(db, s.tenant.id, CUSTOMER).await.map(|d| d.to_string()), Some(PAYER_DOCUMENT.to_owned()));

    // The customer's CPF is known now: the next charge does not ask again.
    propose_charge(db, &app, &s, "d2").await;
    assert_eq!(asked(db, s.tenant.id, STAFF, "CPF ou CNPJ do cliente").await, 1);
});

contract!(the_merchants_agent_is_told_the_payers_document_is_missing, |db| async move {
    let fake = FakeAsaas::start().await;
    let s = Scenario::from_file(db, &asaas_file(&fake)).await;
    let staff = s.customer(db, STAFF).await;
    s.customer(db, CUSTOMER).await;
    let charge = json!({ "customer_phone": format!("+{CUSTOMER}"), "amount": "50.00", "description": "Corte" });
    match s.call(&staff, "propose_charge", charge.clone()).await {
        Outcome::Failed { error, details } => {
            assert_eq!(details["reason"], "payer_document_required");
            assert!(error.contains("CPF ou CNPJ"), "{error}");
        }
        other => panic!("proposed without the payer's document: {other:?}"),
    }
    let mut wrong = charge.clone();
    wrong["payer_document"] = json!("529.982.247-24");
    let invalid = s.call(&staff, "propose_charge", wrong).await;
    assert!(matches!(&invalid, Outcome::Invalid(e) if e.to_string().contains("check digits")), "{invalid:?}");
    let mut right = charge;
    right["payer_document"] = json!(PAYER_DOCUMENT);
    match s.call(&staff, "propose_charge", right).await {
        Outcome::Executed(v) => assert_eq!(v["status"], "awaiting_confirmation", "{v}"),
        other => panic!("not proposed: {other:?}"),
    }
    assert!(fake.seen().is_empty(), "nothing reaches Asaas before the button");
});

contract!(a_deposit_asks_the_customer_for_the_cpf_before_its_charge, |db| async move {
    let fake = FakeAsaas::start().await;
    let file = asaas_file(&fake).replacen("buffer_minutes = 10\n", "buffer_minutes = 10\ndeposit = \"40%\"\n", 1);
    let s = Scenario::from_file(db, &file).await;
    let app = app_on_asaas(db).await;
    let ana = s.customer(db, CUSTOMER).await;
    let input = json!({ "service_id": s.corte, "professional_id": s.ze, "starts_at": next_weekday_at_14h() });
    let booked = s.call_at(&ana, "create_booking", input, Utc::now()).await;
    assert!(matches!(&booked, Outcome::Executed(v) if v["status"] == "held"), "{booked:?}");

    let replier = local_replier(db);
    let requests = DepositRequests::new(db.store.clone(), replier, Arc::new(Gateways::new(asaas_secrets())), LEASE);
    // No document: nothing goes to Asaas, and the customer is asked once however often it sweeps.
    for _ in 0..2 {
        assert_eq!(requests.request_due(Utc::now()).await.unwrap(), 0);
    }
    assert_eq!(asked(db, s.tenant.id, CUSTOMER, "preciso do seu CPF").await, 1);
    assert!(fake.seen().is_empty(), "{:?}", fake.seen());

    // A number that is no document goes to the bot as usual; the CPF is taken and thanked.
    post(&app, CUSTOMER, text("wamid.a.1", CUSTOMER, "529.982.247-24")).await;
    app.drain_turns().await;
    assert_eq!(document_of(db, s.tenant.id, CUSTOMER).await, None);
    post(&app, CUSTOMER, text("wamid.a.2", CUSTOMER, &format!("CPF {PAYER_DOCUMENT}"))).await;
    app.drain_turns().await;
    assert_eq!(document_of(db, s.tenant.id, CUSTOMER).await.map(|d| d.to_string()), Some(PAYER_DOCUMENT.to_owned()));
    assert_eq!(asked(db, s.tenant.id, CUSTOMER, "Já vou gerar o Pix do sinal").await, 1);

    assert_eq!(requests.request_due(Utc::now()).await.unwrap(), 1);
    assert_eq!(fake.customers()[0]["cpfCnpj"], COMPACT);
    let charges = db.store.charges(s.tenant.id, None, Utc::now() - TimeDelta::days(1), 10).await.unwrap();
    assert_eq!(charges.len(), 1);
    assert_eq!(charges[0].amount(), Cents(2000));
    assert_eq!(asked(db, s.tenant.id, CUSTOMER, "pague o sinal").await, 1);
});

contract!(the_payers_document_is_exported_and_erased_with_the_contact, |db| async move {
    let s = Scenario::with_merchant(db).await;
    let ana = s.customer(db, CUSTOMER).await;
    let document = PayerDocument::parse(PAYER_DOCUMENT).unwrap();
    db.store.set_payer_document(s.tenant.id, ana.contact, &document, Utc::now()).await.unwrap();
    let export = db.store.export_contact(s.tenant.id, ana.contact).await.unwrap().expect("the contact");
    assert_eq!(export.contact.payer_document.as_deref(), Some(COMPACT));
    assert_eq!(
        db.store.conversation_contact(s.tenant.id, ana.conversation).await.unwrap().payer_document,
        Some(document)
    );

    let key = balcao::domain::PrivacyKey::derive(&balcao::domain::Secret::new("test"));
    let replier = local_replier(db);
    let erased = balcao::privacy::erase(&db.store, &replier, &key, &s.tenant, ana.contact, Utc::now());
    assert!(erased.await.unwrap());
    let export = db.store.export_contact(s.tenant.id, ana.contact).await.unwrap().expect("the contact");
    assert_eq!(export.contact.payer_document, None);
});
