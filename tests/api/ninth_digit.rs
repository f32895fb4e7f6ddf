//! Brazilian mobiles with and without the ninth digit, on both databases: WhatsApp reports many
//! of them without it (`551188887777` for `+55 11 98888-7777`) while people type it, and one
//! person must stay one contact, one staff member and one open 24-hour window.

use balcao::store::ChargeStore;
use balcao::whatsapp::OutboundMessage;

use crate::contract;
use crate::support::clicks::{STAFF_MENU, button, inbox, last_buttons, last_rows, post};
use crate::support::common::{TestApp, contacts, local_test_config};
use crate::support::payloads::text;
use crate::support::scenario::{STAFF, Scenario, merchant_file};

/// `STAFF` as WhatsApp reports it, without the ninth digit.
const STAFF_REPORTED: &str = "551188887777";
/// The customer as WhatsApp reports them; the merchant types `11 99999-0001`.
const CUSTOMER_REPORTED: &str = "551199990001";

contract!(a_staff_number_matches_with_or_without_the_ninth_digit, |db| async move {
    // Configured with the 9 (`merchant_file`), reported without it.
    let s = Scenario::with_merchant(db).await;
    let app = TestApp::spawn(db, local_test_config("http://127.0.0.1:9", &[])).await;
    post(&app, STAFF_REPORTED, text("wamid.n9.1", STAFF_REPORTED, "oi")).await;
    app.drain_turns().await;
    let menu = inbox(db, s.tenant.id, STAFF_REPORTED).await;
    assert_eq!(last_rows(&menu), STAFF_MENU, "the staff menu, not the customer's");

    // Configured without it, reported with it.
    let file = merchant_file().replace(&format!("+{STAFF}"), &format!("+{STAFF_REPORTED}"));
    let s = Scenario::from_file(db, &file).await;
    post(&app, STAFF, text("wamid.n9.2", STAFF, "oi")).await;
    app.drain_turns().await;
    assert_eq!(last_rows(&inbox(db, s.tenant.id, STAFF).await), STAFF_MENU);
});

contract!(a_charge_to_a_typed_ninth_digit_reaches_the_open_conversation, |db| async move {
    let s = Scenario::with_merchant(db).await;
    let app = TestApp::spawn(db, local_test_config("http://127.0.0.1:9", &[])).await;
    // The customer wrote a minute ago; WhatsApp reported the number without the 9.
    post(&app, CUSTOMER_REPORTED, text("wamid.c9.1", CUSTOMER_REPORTED, "oi")).await;
    app.drain_turns().await;
    let before = contacts(db, s.tenant.id).await;

    // The merchant types it with the 9.
    post(&app, STAFF, button(STAFF, "wamid.c9.2", "m:charge")).await;
    app.drain_turns().await;
    for (n, answer) in ["50,00", "11 99999-0001", "Corte e barba"].iter().enumerate() {
        post(&app, STAFF, text(&format!("wamid.c9.{}", n + 3), STAFF, answer)).await;
        app.drain_turns().await;
    }
    let confirm = last_buttons(&inbox(db, s.tenant.id, STAFF).await)[0].clone();
    post(&app, STAFF, button(STAFF, "wamid.c9.click", &confirm)).await;
    app.drain_turns().await;

    let charges = db.store.charges(s.tenant.id, None, chrono::Utc::now() - chrono::TimeDelta::days(1), 10).await;
    assert_eq!(charges.unwrap().len(), 1);
    assert_eq!(contacts(db, s.tenant.id).await, before + 1, "the staff's contact only; the customer is one contact");
    // Inside the window (no template), to the number WhatsApp reported.
    let customer = inbox(db, s.tenant.id, CUSTOMER_REPORTED).await;
    assert!(customer.iter().any(|m| m.body().contains("R$ 50,00")), "{customer:?}");
    assert!(!customer.iter().any(|m| matches!(m, OutboundMessage::Template { .. })), "{customer:?}");
    assert!(inbox(db, s.tenant.id, "5511999990001").await.is_empty(), "nothing to the typed spelling");
});
