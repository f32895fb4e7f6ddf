//! The console's operations pages on both databases: charges and their paid-per-day chart,
//! pending actions, failures with the dead-job retry, the catalog; tenant scoping, login and
//! CSRF.

use balcao::domain::JobId;
use balcao::store::{ChargeStore, JobStore};
use chrono::{TimeDelta, Utc};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::contract;
use crate::support::clicks::{CUSTOMER, button, post, propose_charge};
use crate::support::common::{TestApp, TestDb, local_test_config};
use crate::support::console::{Console, ConsoleApp};
use crate::support::payloads::text;
use crate::support::queue::{record, timing};
use crate::support::scenario::{STAFF, Scenario};

/// Buries a fresh job of `tenant` (one permanent failure); its id.
async fn dead_job(db: &TestDb, tenant: &balcao::tenant::Tenant, phone: &str) -> JobId {
    let now = Utc::now();
    let (_, job) =
        record(&db.store, tenant, &format!("wamid.{}", uuid::Uuid::new_v4()), phone, &timing(0, 0, 3), now).await;
    let claimed = db.store.claim_next("w", now, now + TimeDelta::seconds(30)).await.unwrap().unwrap();
    assert_eq!(claimed.lease.job, job);
    db.store.fail(&claimed.lease, "boom: the model said <no>", true, now, now).await.unwrap();
    assert_eq!(db.store.job(tenant.id, job).await.unwrap().unwrap().state, "dead");
    job
}

contract!(a_dead_job_retried_from_the_console_is_runnable_again_once, |db| async move {
    let s = ConsoleApp::spawn(db).await;
    let console = Console::login_new(db, &s.app.url, "dono@loja.com", &s.tenant.slug).await;
    let job = dead_job(db, &s.tenant, "5511999990001").await;
    let failures = format!("/admin/{}/failures", s.tenant.slug);

    let page = console.get(&failures).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(page.body.contains(&format!("data-job=\"{}\"", job.0)) && page.body.contains("Tentar de novo"));
    assert!(page.body.contains("boom: the model said &#60;no&#62;"), "the last error, escaped");
    assert!(page.body.contains("1/3"), "attempts");

    let retry = format!("/admin/{}/jobs/{}/retry", s.tenant.slug, job.0);
    let first = console.post(&retry, &[]).await;
    assert_eq!(first.location.as_deref(), Some(format!("{failures}?ok=requeued").as_str()));
    let snapshot = db.store.job(s.tenant.id, job).await.unwrap().unwrap();
    assert_eq!((snapshot.state.as_str(), snapshot.attempts), ("retryable", 1), "attempts never go back");
    assert!(snapshot.max_attempts > snapshot.attempts, "a fresh budget");
    // A second click changes nothing.
    let second = console.post(&retry, &[]).await;
    assert_eq!(second.location.as_deref(), Some(format!("{failures}?ok=not_dead").as_str()));
    let again = db.store.job(s.tenant.id, job).await.unwrap().unwrap();
    assert_eq!((again.state.as_str(), again.max_attempts), ("retryable", snapshot.max_attempts));
    // A worker claims it again.
    let now = Utc::now() + TimeDelta::seconds(1);
    let claimed = db.store.claim_next("w", now, now + TimeDelta::seconds(30)).await.unwrap().unwrap();
    assert_eq!((claimed.lease.job, claimed.lease.attempt), (job, 2));
    assert!(!console.get(&failures).await.body.contains(&format!("data-job=\"{}\"", job.0)));
});

contract!(another_tenants_job_cannot_be_retried_and_forms_need_csrf, |db| async move {
    let s = ConsoleApp::spawn(db).await;
    let other = db.tenant_with("999000111", "outra-loja", None).await;
    let theirs = dead_job(db, &other, "5511999990009").await;
    let console = Console::login_new(db, &s.app.url, "dono@loja.com", &s.tenant.slug).await;
    console.get(&format!("/admin/{}/failures", s.tenant.slug)).await;
    let page = console.post(&format!("/admin/{}/jobs/{}/retry", s.tenant.slug, theirs.0), &[]).await;
    assert_eq!(page.status, StatusCode::NOT_FOUND);
    let page = console.post(&format!("/admin/{}/jobs/{}/retry", other.slug, theirs.0), &[]).await;
    assert_eq!(page.status, StatusCode::NOT_FOUND);
    assert_eq!(db.store.job(other.id, theirs).await.unwrap().unwrap().state, "dead");

    let ours = dead_job(db, &s.tenant, "5511999990001").await;
    let page = console.post_raw(&format!("/admin/{}/jobs/{}/retry", s.tenant.slug, ours.0), &[]).await;
    assert_eq!(page.status, StatusCode::FORBIDDEN);
    assert_eq!(db.store.job(s.tenant.id, ours).await.unwrap().unwrap().state, "dead");

    // Without a session, every page sends to the login.
    let anonymous = Console::new(&s.app.url);
    for section in ["charges", "actions", "failures", "catalog"] {
        let page = anonymous.get(&format!("/admin/{}/{section}", s.tenant.slug)).await;
        assert_eq!(page.location.as_deref(), Some("/admin/login"), "{section}");
    }
    anonymous.get("/admin/login").await; // a valid CSRF token, still no session
    let page = anonymous.post(&format!("/admin/{}/jobs/{}/retry", s.tenant.slug, ours.0), &[]).await;
    assert_eq!(page.location.as_deref(), Some("/admin/login"));
});

contract!(the_charges_chart_totals_match_the_paid_charges, |db| async move {
    let s = Scenario::with_merchant(db).await;
    let app = TestApp::spawn(db, local_test_config("http://127.0.0.1:9", &[])).await;
    post(&app, CUSTOMER, text("wamid.c.1", CUSTOMER, "oi")).await;
    app.drain_turns().await;
    let console = Console::login_new(db, &app.url, "dono@barbearia.com", &s.tenant.slug).await;
    let charges = format!("/admin/{}/charges", s.tenant.slug);

    let confirm = propose_charge(db, &app, &s, "m").await;
    // Before it is confirmed, the proposal is a pending action.
    let page = console.get(&format!("/admin/{}/actions", s.tenant.slug)).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(page.body.contains("cobrança") && page.body.contains("R$ 50,00") && page.body.contains("pending"));

    post(&app, STAFF, button(STAFF, "wamid.m.click", &confirm)).await;
    app.drain_turns().await;
    let page = console.get(&charges).await;
    assert!(page.body.contains("Corte e barba") && page.body.contains("aguardando"), "{}", page.body);
    assert!(page.body.contains("data-total-cents=\"0\""), "nothing paid yet");

    let charge = db.store.charges(s.tenant.id, None, Utc::now() - TimeDelta::days(1), 10).await.unwrap().remove(0);
    let paid_path = format!("{}/simulator/api/tenants/{}/charges/{}/paid", app.url, s.tenant.slug, charge.id);
    let paid: Value = app.http.post(&paid_path).json(&json!({})).send().await.unwrap().json().await.unwrap();
    assert_eq!(paid["paid"], true);
    let charge = db.store.charge(s.tenant.id, charge.id).await.unwrap().unwrap();
    let day = charge.paid_at.unwrap().with_timezone(&s.tenant.timezone).date_naive();

    let page = console.get(&charges).await;
    assert!(page.body.contains("data-total-cents=\"5000\"") && page.body.contains("R$ 50,00"), "{}", page.body);
    assert!(page.body.contains(&format!("data-date=\"{day}\" data-cents=\"5000\"")), "the paid day's bar");
    assert_eq!(page.body.matches("data-cents=\"").count(), 30);
    assert!(page.body.contains("paga") && page.body.contains(&charge.txid) && page.body.contains("sandbox"));
});

contract!(the_catalog_is_read_only_and_complete, |db| async move {
    let s = Scenario::new(db).await;
    let app = TestApp::spawn(db, local_test_config("http://127.0.0.1:9", &[])).await;
    let console = Console::login_new(db, &app.url, "dono@barbearia.com", &s.tenant.slug).await;
    let page = console.get(&format!("/admin/{}/catalog", s.tenant.slug)).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    for needle in [
        "Corte masculino",
        "30 min",
        "10 min",
        "R$ 50,00",
        "R$ 35,00",
        "Zé",
        "Rafa",
        "09:00–12:00, 13:00–18:00",
        "10:00–16:00",
        "balcao tenant apply",
        "America/Sao_Paulo",
    ] {
        assert!(page.body.contains(needle), "{needle}: {}", page.body);
    }
    assert!(!page.body.contains("<form method=\"post\" action=\"/admin/barbearia/catalog"), "read-only");
});
