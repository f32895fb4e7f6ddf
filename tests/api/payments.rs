//! Payment notifications end to end with the Asaas gateway against its loopback fake: a charge
//! confirmed by the merchant's button is created once at the provider; its notification,
//! delivered five times at once, marks it paid once and tells each party once; a forged token
//! changes nothing; an unknown charge is kept and reported; the poller finds a payment whose
//! notification never came. Both databases.

use std::sync::Arc;

use balcao::config::PixSecrets;
use balcao::jobs::Replier;
use balcao::pix::Gateways;
use balcao::store::{ChargeStore, PaymentStore};
use serde_json::json;

use crate::contract;
use crate::support::clicks::{CUSTOMER, button, inbox, post, propose_charge, told};
use crate::support::common::{TestApp, local_test_config};
use crate::support::fake_asaas::{FakeAsaas, WEBHOOK_TOKEN};
use crate::support::payloads::text;
use crate::support::scenario::{
    STAFF, Scenario, app_on_asaas, asaas_file, asaas_secrets as secrets, local_replier, merchant_file,
};

async fn notify(app: &TestApp, token: &str, event: &str, payment: &str) -> reqwest::StatusCode {
    app.http
        .post(format!("{}/webhooks/pix/barbearia/asaas", app.url))
        .header("asaas-access-token", token)
        .json(&json!({ "id": event, "event": "PAYMENT_RECEIVED", "dateCreated": "2026-12-03 10:00:00",
                       "payment": { "object": "payment", "id": payment } }))
        .send()
        .await
        .expect("notification")
        .status()
}

contract!(a_provider_payment_is_recorded_and_announced_once, |db| async move {
    let fake = FakeAsaas::start().await;
    let s = Scenario::from_file(db, &asaas_file(&fake)).await;
    let mut config = local_test_config("http://127.0.0.1:9", &[]);
    config.pix_secrets = PixSecrets(secrets());
    let app = TestApp::spawn(db, config).await;
    post(&app, CUSTOMER, text("wamid.p.0", CUSTOMER, "oi")).await;
    app.drain_turns().await;
    let confirm = propose_charge(db, &app, &s, "p").await;
    post(&app, STAFF, button(STAFF, "wamid.p.click", &confirm)).await;
    app.drain_turns().await;

    assert_eq!(fake.payments().len(), 1, "created once at the provider");
    let since = chrono::Utc::now() - chrono::TimeDelta::days(1);
    let charge = db.store.charges(s.tenant.id, None, since, 10).await.unwrap().pop().unwrap();
    assert_eq!(charge.gateway, "asaas");
    let payment = charge.provider_ref.clone().expect("the provider's id");
    assert!(inbox(db, s.tenant.id, CUSTOMER).await.iter().any(|m| m.body() == charge.copia_e_cola));

    // A forged token: refused, nothing stored or changed.
    assert_eq!(notify(&app, "wrong-token", "evt_forged", &payment).await, reqwest::StatusCode::UNAUTHORIZED);

    // Paid at Asaas; the notification arrives five times at once.
    fake.update(&payment, json!({ "status": "RECEIVED" }));
    let deliveries = (0..5).map(|_| notify(&app, WEBHOOK_TOKEN, "evt_1", &payment));
    for status in futures::future::join_all(deliveries).await {
        assert_eq!(status, reqwest::StatusCode::OK);
    }
    let replier = Replier::new(db.store.clone(), None, true, Arc::new(tokio::sync::Notify::new()));
    let gateways = Gateways::new(secrets());
    assert_eq!(balcao::money::payments::process_due(&db.store, &replier, &gateways).await.unwrap(), 1, "stored once");
    assert_eq!(balcao::money::payments::process_due(&db.store, &replier, &gateways).await.unwrap(), 0);
    assert_eq!(db.store.charge(s.tenant.id, charge.id).await.unwrap().unwrap().status, "paid");
    assert_eq!(told(&inbox(db, s.tenant.id, CUSTOMER).await, "Recebemos seu pagamento"), 1);
    assert_eq!(told(&inbox(db, s.tenant.id, STAFF).await, "Cobrança paga"), 1);

    // A notification about a payment we never created: stored, answered 200, reported.
    assert_eq!(notify(&app, WEBHOOK_TOKEN, "evt_2", "pay_unknown").await, reqwest::StatusCode::OK);
    assert_eq!(balcao::money::payments::process_due(&db.store, &replier, &gateways).await.unwrap(), 1);

    // A second charge, paid at Asaas, whose notification never comes: the poller finds it.
    let confirm = propose_charge(db, &app, &s, "q").await;
    post(&app, STAFF, button(STAFF, "wamid.q.click", &confirm)).await;
    app.drain_turns().await;
    let second = db.store.charges(s.tenant.id, Some("pending"), since, 10).await.unwrap().pop().unwrap();
    fake.update(second.provider_ref.as_deref().unwrap(), json!({ "status": "RECEIVED" }));
    let later = chrono::Utc::now() + chrono::TimeDelta::minutes(5);
    assert_eq!(balcao::money::payments::poll_pending(&db.store, &replier, &gateways, later).await.unwrap(), 1);
    assert_eq!(db.store.charge(s.tenant.id, second.id).await.unwrap().unwrap().status, "paid");
    assert_eq!(balcao::money::payments::poll_pending(&db.store, &replier, &gateways, later).await.unwrap(), 0);

    // Overdue at the provider: the poller closes it (a provider's charge never expires by our
    // clock alone, since it may still be paid).
    let confirm = propose_charge(db, &app, &s, "r").await;
    post(&app, STAFF, button(STAFF, "wamid.r.click", &confirm)).await;
    app.drain_turns().await;
    let third = db.store.charges(s.tenant.id, Some("pending"), since, 10).await.unwrap().pop().unwrap();
    fake.update(third.provider_ref.as_deref().unwrap(), json!({ "status": "OVERDUE" }));
    assert_eq!(balcao::money::payments::poll_pending(&db.store, &replier, &gateways, later).await.unwrap(), 0);
    assert_eq!(db.store.charge(s.tenant.id, third.id).await.unwrap().unwrap().status, "expired");
});

contract!(notifications_for_unknown_tenants_or_the_sandbox_are_not_found, |db| async move {
    let s = Scenario::with_merchant(db).await;
    let app = TestApp::spawn(db, local_test_config("http://127.0.0.1:9", &[])).await;
    let post = |path: &str| app.http.post(format!("{}{path}", app.url)).body("{}").send();
    assert_eq!(post("/webhooks/pix/nobody/asaas").await.unwrap().status(), reqwest::StatusCode::NOT_FOUND);
    assert_eq!(post("/webhooks/pix/barbearia/sandbox").await.unwrap().status(), reqwest::StatusCode::NOT_FOUND);
    assert_eq!(post("/webhooks/pix/barbearia/asaas").await.unwrap().status(), reqwest::StatusCode::NOT_FOUND);
    let _ = s;
});

/// A notification that arrives before the charge it is about, then the charge; `given_up`: the
/// event's looks ran out (it is unmatched) before the charge was recorded.
async fn early_notification(db: &crate::support::common::TestDb, given_up: bool) {
    let fake = FakeAsaas::start().await;
    let s = Scenario::from_file(db, &asaas_file(&fake)).await;
    let mut config = local_test_config("http://127.0.0.1:9", &[]);
    config.pix_secrets = PixSecrets(secrets());
    let app = TestApp::spawn(db, config).await;
    post(&app, CUSTOMER, text("wamid.e.0", CUSTOMER, "oi")).await;
    app.drain_turns().await;
    let replier = Replier::new(db.store.clone(), None, true, Arc::new(tokio::sync::Notify::new()));
    let gateways = Gateways::new(secrets());

    // The provider's notification for the payment it is creating arrives before our create's
    // response: no charge knows it yet.
    let payment = "pay_000000000001";
    assert_eq!(notify(&app, WEBHOOK_TOKEN, "evt_early", payment).await, reqwest::StatusCode::OK);
    if given_up {
        // Its looks ran out before the charge was recorded (a create retried after a long outage).
        // On the database's clock, as the event was stamped, a moment later (an estimate of the
        // clocks' difference may put a stamp an instant after this process's now).
        let now = db.store.db_time(chrono::Utc::now()) + chrono::TimeDelta::seconds(1);
        let event = db.store.claim_payment_event(now, now).await.unwrap().expect("the stored event");
        db.store
            .finish_payment_event(event.id, "unmatched", None, Some("no such charge"), chrono::Utc::now())
            .await
            .unwrap();
    } else {
        // It is looked at again, not given up as unmatched.
        balcao::money::payments::process_due(&db.store, &replier, &gateways).await.unwrap();
        // Looked at once more without finding its charge, its next look minutes away (its looks
        // for the charge used to count toward the provider's backoff): the record brings it
        // forward all the same.
        let later = chrono::Utc::now() + chrono::TimeDelta::hours(1);
        let event = db.store.claim_payment_event(later, later).await.unwrap().expect("the stored event");
        assert_eq!(event.attempts, 1, "looked at once, then again");
        let far = chrono::Utc::now() + chrono::TimeDelta::minutes(10);
        db.store.retry_payment_event(event.id, balcao::store::NO_CHARGE_YET, far).await.unwrap();
    }
    let confirm = propose_charge(db, &app, &s, "e").await;
    post(&app, STAFF, button(STAFF, "wamid.e.click", &confirm)).await;
    app.drain_turns().await;
    let since = chrono::Utc::now() - chrono::TimeDelta::days(1);
    let charge = db.store.charges(s.tenant.id, None, since, 10).await.unwrap().pop().unwrap();
    assert_eq!(charge.provider_ref.as_deref(), Some(payment));
    fake.update(payment, json!({ "status": "RECEIVED" }));

    // Its next look (at once: the charge brought it forward or reopened it) pays it, once.
    for _ in 0..50 {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        balcao::money::payments::process_due(&db.store, &replier, &gateways).await.unwrap();
        if db.store.charge(s.tenant.id, charge.id).await.unwrap().unwrap().status == "paid" {
            break;
        }
    }
    assert_eq!(db.store.charge(s.tenant.id, charge.id).await.unwrap().unwrap().status, "paid");
    assert_eq!(told(&inbox(db, s.tenant.id, CUSTOMER).await, "Recebemos seu pagamento"), 1);
    assert_eq!(told(&inbox(db, s.tenant.id, STAFF).await, "Cobrança paga"), 1);
}

contract!(a_notification_that_beats_its_charge_pays_it_once_the_charge_exists, |db| async move {
    early_notification(db, false).await;
});

contract!(a_notification_given_up_as_unmatched_is_processed_when_its_charge_is_recorded, |db| async move {
    early_notification(db, true).await;
});

// Servers sharing one database: each look at a stored notification is one process's, so its
// attempts count once and the provider is not asked in parallel; a process that dies mid-look
// leaves the event to another once the claim's lease is over.
contract!(a_notification_is_looked_at_by_one_process_at_a_time, |db| async move {
    let s = Scenario::from_file(db, &merchant_file()).await;
    let now = db.store.db_time(chrono::Utc::now());
    let event = balcao::store::NewPaymentEvent {
        tenant: s.tenant.id,
        provider: "asaas",
        event_id: "evt_claimed",
        ref_kind: "provider_ref",
        charge_ref: "pay_000000000009",
    };
    assert!(db.store.record_payment_event(&event, now).await.unwrap());
    let lease = now + chrono::TimeDelta::seconds(60);
    let racers = (0..8).map(|_| {
        let store = db.store.clone();
        tokio::spawn(async move { store.claim_payment_event(now, lease).await.unwrap() })
    });
    let claims: Vec<_> = futures::future::join_all(racers).await.into_iter().map(Result::unwrap).collect();
    let won: Vec<_> = claims.iter().flatten().collect();
    assert_eq!(won.len(), 1, "one claim of {} racers", claims.len());
    assert_eq!(won[0].event_id, "evt_claimed");
    assert_eq!(won[0].attempts, 0, "a claim is not an attempt");
    assert!(db.store.claim_payment_event(now, lease).await.unwrap().is_none(), "held until the lease ends");
    let after = lease + chrono::TimeDelta::seconds(1);
    let again = db.store.claim_payment_event(after, after).await.unwrap();
    assert_eq!(again.map(|e| e.event_id), Some("evt_claimed".to_owned()), "due again after the lease");
});

/// A charge confirmed by the merchant on an Asaas tenant with `pix_timing` in its `[pix]`
/// table, ready to be executed attempt by attempt, as a turn's retries would.
struct ConfirmedCharge {
    fake: FakeAsaas,
    s: Scenario,
    _app: TestApp,
    action: balcao::actions::PendingAction,
    merchant: balcao::domain::ContactId,
    tool: balcao::actions::ExecuteAction,
    input: serde_json::Value,
}

impl ConfirmedCharge {
    async fn start(db: &crate::support::common::TestDb, pix_timing: &str) -> Self {
        use balcao::actions::{ConfirmedVia, ExecuteAction};
        use balcao::domain::{ClickId, Decision};
        use balcao::store::{ActionStore, Decider, InboundStore};

        let fake = FakeAsaas::start().await;
        let s = Scenario::from_file(db, &asaas_file(&fake).replace("[pix]\n", &format!("[pix]\n{pix_timing}"))).await;
        let app = app_on_asaas(db).await;
        post(&app, CUSTOMER, text("wamid.t.0", CUSTOMER, "oi")).await;
        app.drain_turns().await;
        let click = ClickId::parse(&propose_charge(db, &app, &s, "t").await).expect("a click id");
        let tenant = s.tenant.id;
        let action = db.store.action(tenant, click.action).await.unwrap().expect("the proposal");
        let merchant = db.store.conversation_contact(tenant, action.conversation).await.unwrap().contact_id;
        let decider = Decider {
            tenant,
            conversation: action.conversation,
            contact: merchant,
            staff: true,
            via: ConfirmedVia::Button,
            message: "wamid.t.click",
            simulator: None,
        };
        assert!(db.store.decide_action(click.action, Decision::Confirm, &decider, chrono::Utc::now()).await.unwrap());
        let replier = local_replier(db);
        let tool = ExecuteAction { store: db.store.clone(), replier, gateways: Arc::new(Gateways::new(secrets())) };
        let input = json!({ "action_id": click.action.to_string() });
        Self { fake, s, _app: app, action, merchant, tool, input }
    }

    /// The call as attempt `attempt` of the click's turn makes it.
    fn ctx(&self, attempt: i64) -> balcao::ledger::CallContext<'_> {
        balcao::ledger::CallContext {
            tenant: &self.s.tenant,
            customer: self.merchant,
            conversation: self.action.conversation,
            turn: Some(balcao::domain::JobId(1)),
            turn_attempt: Some(attempt),
            trigger_message_id: Some("wamid.t.click"),
            tool_use_id: None,
            now: chrono::Utc::now(),
        }
    }

    /// One payment at Asaas, recorded as the one charge, its code sent to the customer once.
    async fn assert_one_payment(&self, db: &crate::support::common::TestDb) {
        let tenant = self.s.tenant.id;
        assert_eq!(self.fake.payments().len(), 1, "one payment at Asaas: {:?}", self.fake.payments());
        let since = chrono::Utc::now() - chrono::TimeDelta::days(1);
        let charges = db.store.charges(tenant, None, since, 10).await.unwrap();
        assert_eq!(charges.len(), 1);
        assert_eq!(charges[0].provider_ref.as_deref(), self.fake.payments()[0]["id"].as_str(), "the one recorded");
        let codes = inbox(db, tenant, CUSTOMER).await.iter().filter(|m| m.body() == charges[0].copia_e_cola).count();
        assert_eq!(codes, 1, "one code to the customer");
    }

    /// The state and generation of the charge's ledger row.
    async fn row(&self, db: &crate::support::common::TestDb) -> (Option<balcao::ledger::LedgerState>, i64) {
        use balcao::store::LedgerStore;
        let rows = db.store.executions_of_conversation(self.s.tenant.id, self.action.conversation).await.unwrap();
        let row = rows.iter().find(|row| row.tool == "execute_action").expect("the charge's row");
        (row.state(), row.generation)
    }
}

// A confirmed charge whose first attempt is still on its way to Asaas (held at the customer
// lookup) when a later attempt of the same turn takes its ledger row over. Asaas does not
// deduplicate creates, so the later attempt waits out the first one's lease and request
// timeout before its lookup: one payment at the provider, recorded, one code to the customer.
// (Before the wait, the takeover looked up at once, found nothing and posted a second one.)
contract!(a_charge_taken_over_from_an_attempt_still_sending_is_created_once, |db| async move {
    use crate::support::fake_asaas::{Fault, Route};
    use balcao::ledger::{Executor, LedgerState, Outcome};
    use balcao::store::LedgerStore;

    // A one-second request timeout: what the attempt that takes over waits out (the fake creates
    // at once when released, so no margin for a slow provider).
    let c = ConfirmedCharge::start(db, "timeout_seconds = 1\nlookup_margin_seconds = 0\n").await;
    // The attempt that takes over waits out its predecessor's lease, renewing its own meanwhile:
    // a lease long against any stall of a loaded host (a 3 s lease once lapsed when a renewal
    // stalled on a busy machine, which closed the send window and failed the test).
    let executor = Executor::new(db.store.clone(), std::time::Duration::from_secs(10));
    let gate = Arc::new(tokio::sync::Notify::new());
    c.fake.fail(Route::ListCustomers, Fault::Hold(gate.clone()));

    let (first_ctx, second_ctx) = (c.ctx(1), c.ctx(2));
    let first = executor.execute(&c.tool, &first_ctx, &c.input);
    let second = async {
        // The first attempt is at Asaas, held; the second takes its row over...
        while !c.fake.seen().iter().any(|seen| seen.route == Route::ListCustomers) {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        let taking = executor.execute(&c.tool, &second_ctx, &c.input);
        let release = async {
            loop {
                let rows = db.store.executions_of_conversation(c.s.tenant.id, c.action.conversation).await.unwrap();
                if rows.iter().any(|row| row.tool == "execute_action" && row.generation == 2) {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
            // ...and the first goes on at once, before its next renewal finds the row gone.
            gate.notify_one();
        };
        futures::future::join(taking, release).await.0
    };
    let (first, second) = futures::future::join(first, second).await;
    assert!(matches!(first.unwrap(), Outcome::AlreadyInProgress), "the first attempt lost the row");
    let second = second.unwrap();
    assert!(matches!(second, Outcome::Executed(_)), "{second:?}");
    c.assert_one_payment(db).await;
    assert_eq!(c.row(db).await, (Some(LedgerState::Succeeded), 2));
});

// Asaas is slow: our create times out (the outcome is unknown) and Asaas makes the payment only
// later. The retry a moment after finds nothing at first; trusting that, it used to post a second
// payment. It now waits until the first request's give-up plus its timeout and the lookup margin
// before it trusts an empty lookup: one payment, recorded, one code to the customer.
contract!(a_create_asaas_completes_after_we_gave_up_leaves_one_payment, |db| async move {
    use crate::support::fake_asaas::{Fault, Route};
    use balcao::ledger::{Executor, LedgerState, Outcome};

    let c = ConfirmedCharge::start(db, "timeout_seconds = 1\nlookup_margin_seconds = 2\n").await;
    let executor = Executor::new(db.store.clone(), std::time::Duration::from_secs(10));
    let gate = Arc::new(tokio::sync::Notify::new());
    c.fake.fail(Route::CreatePayment, Fault::Hold(gate.clone()));

    let first = executor.execute(&c.tool, &c.ctx(1), &c.input).await.unwrap();
    assert!(matches!(first, Outcome::Retryable { .. }), "{first:?}");
    assert_eq!(c.row(db).await, (Some(LedgerState::OutcomeUnknown), 1));
    assert!(c.fake.payments().is_empty(), "Asaas has not made it yet");

    let second = c.ctx(2);
    let retry = executor.execute(&c.tool, &second, &c.input);
    let slow_asaas = async {
        // The retry took the row over and is waiting; only now does Asaas make the payment.
        while c.row(db).await.1 < 2 {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        gate.notify_one();
    };
    let (retry, ()) = futures::future::join(retry, slow_asaas).await;
    let retry = retry.unwrap();
    assert!(matches!(retry, Outcome::Executed(_)), "{retry:?}");
    c.assert_one_payment(db).await;
    assert_eq!(c.row(db).await, (Some(LedgerState::Succeeded), 2));
});
