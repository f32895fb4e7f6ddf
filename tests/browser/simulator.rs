//! The web simulator as a person uses it: a customer books through the guided menu by
//! clicking, and a merchant sends a Pix charge that the customer sees and "pays".

use balcao::store::BookingStore;
use serde_json::{Value, json};

use crate::contract;
use crate::harness::{Browser, Server, local_config};

pub const SLUG: &str = "barbearia-do-ze";
pub const EXAMPLE: &str = include_str!("../../tenants/example.toml");

/// The newest bot message after `after` that offers choices; its id.
pub async fn next_choices(b: &Browser, after: i64) -> i64 {
    let script = "const m = [...document.querySelectorAll('.msg.in')].filter(e => \
                  Number(e.dataset.id) > arguments[0] && e.querySelector('button.reply, .list-row')); \
                  return m.length ? Number(m[m.length - 1].dataset.id) : null;";
    let id = b.wait_until(&format!("a bot message with choices after {after}"), script, vec![json!(after)]).await;
    id.as_i64().expect("a message id")
}

/// The choices (`data-id`) of bot message `id`.
pub async fn choices(b: &Browser, id: i64) -> Vec<String> {
    let script = "return [...document.querySelectorAll(`.msg.in[data-id=\"${arguments[0]}\"] \
                  :is(button.reply, .list-row)`)].map(e => e.dataset.id);";
    let value = b.eval(script, vec![json!(id)]).await;
    value.as_array().expect("ids").iter().filter_map(Value::as_str).map(str::to_owned).collect()
}

pub async fn click_choice(b: &Browser, message: i64, choice: &str) {
    b.click(&format!(".msg.in[data-id=\"{message}\"] [data-id=\"{choice}\"]")).await;
}

pub async fn say(b: &Browser, text: &str) {
    b.fill("#text", text).await;
    b.click("#send").await;
}

/// Waits until the page's event stream is open for `wa_id` (digits).
pub async fn connected(b: &Browser, wa_id: &str) {
    let key = format!("{SLUG}|{wa_id}");
    b.wait_until(
        &format!("the chat with {wa_id}"),
        "return document.body.dataset.connected === arguments[0]",
        vec![json!(key)],
    )
    .await;
}

/// On the simulator page: the customer books the first offered slot by clicking through the
/// guided menu, up to its "Pronto!".
pub async fn book_by_buttons(b: &Browser, server: &Server) {
    b.goto(&format!("{}/simulator?tenant={SLUG}", server.url)).await;
    connected(b, "5511900000001").await;
    b.screenshot("1-open").await;

    // What the customer types is shown as text, never as markup.
    say(b, "<i>oi</i>").await;
    let menu = next_choices(b, 0).await;
    let sent = b
        .eval("return [...document.querySelectorAll('.msg.out')].map(e => [e.textContent, e.children.length])", vec![])
        .await;
    assert_eq!(sent, json!([["<i>oi</i>", 0]]));
    assert_eq!(choices(b, menu).await, ["g:book", "g:mine"]);
    b.screenshot("2-menu").await;

    click_choice(b, menu, "g:book").await;
    let mut last = menu;
    let mut confirmed = false;
    for step in 3..12 {
        last = next_choices(b, last).await;
        b.screenshot(&format!("{step}-choices")).await;
        let ids = choices(b, last).await;
        // Choosing a time proposes the booking: its buttons name a pending action.
        if let Some(yes) = ids.iter().find(|id| id.starts_with("a:") && id.ends_with(":y")) {
            click_choice(b, last, yes).await;
            confirmed = true;
            break;
        }
        click_choice(b, last, ids.first().expect("a choice")).await;
    }
    assert!(confirmed, "the menu never proposed a booking");
    b.wait_for_text(".msg.in", "Pronto!").await;
    b.screenshot("booked").await;
}

contract!(a_customer_books_through_the_menu_buttons, |db| async move {
    let Some(b) = Browser::start(&format!("booking-{}", db.store.backend())).await else { return };
    Server::apply_tenant(db, EXAMPLE).await;
    let server = Server::start(db, local_config()).await;
    book_by_buttons(&b, &server).await;
    let tenant = balcao::store::TenantStore::tenant_by_slug(&db.store, SLUG).await.unwrap().unwrap();
    assert_eq!(db.store.count_active_appointments(tenant.id).await.unwrap(), 1);

    b.close().await;
    server.stop().await;
});

/// On the simulator page: the merchant (staff number) charges R$ 50,00 through the staff menu,
/// confirms, the customer sees the Pix and "pays" it in the sandbox, and both are told.
pub async fn charge_and_pay(b: &Browser, server: &Server) {
    b.goto(&format!("{}/simulator?tenant={SLUG}", server.url)).await;
    connected(b, "5511900000001").await;
    // The customer writes first: a charge goes out as free-form messages inside the window.
    say(b, "oi").await;
    next_choices(b, 0).await;

    b.click("#as-staff").await;
    connected(b, "5511988887777").await;
    say(b, "oi").await;
    let menu = next_choices(b, 0).await;
    b.screenshot("1-staff-menu").await;
    click_choice(b, menu, "m:charge").await;
    b.wait_for_text(".msg.in", "Qual o valor").await;
    say(b, "50,00").await;
    // The customer who just wrote is offered: one tap instead of typing the number.
    b.wait_for_text(".msg.in", "Para quem é a cobrança?").await;
    let ask = next_choices(b, menu).await;
    click_choice(b, ask, "m:to:5511900000001").await;
    b.wait_for_text(".msg.in", "descrição").await;
    say(b, "Corte e barba").await;
    let offer = next_choices(b, ask).await;
    b.screenshot("2-offer").await;
    let confirm = b
        .eval(
            "return [...document.querySelectorAll(`.msg.in[data-id=\"${arguments[0]}\"] button.reply`)]\
             .find(e => e.textContent === 'Confirmar').dataset.id",
            vec![json!(offer)],
        )
        .await;
    click_choice(b, offer, confirm.as_str().expect("a Confirmar button")).await;
    b.wait_for_text(".msg.in", "enviada").await;
    b.screenshot("3-sent").await;

    b.click("#as-customer").await;
    connected(b, "5511900000001").await;
    b.wait_for(".copia-e-cola").await;
    b.wait_until(
        "the QR image",
        "const i = document.querySelector('img.qr'); return i && i.complete && i.naturalWidth > 0",
        vec![],
    )
    .await;
    let code = b.eval("return document.querySelector('.copia-e-cola').textContent", vec![]).await;
    assert!(code.as_str().is_some_and(|c| c.starts_with("000201")), "{code}");
    b.screenshot("4-customer-pix").await;
    b.click("button.mark-paid[data-charge]").await;
    b.wait_for_text(".msg.in", "Recebemos seu pagamento de R$ 50,00").await;
    b.screenshot("5-customer-paid").await;

    b.click("#as-staff").await;
    connected(b, "5511988887777").await;
    b.wait_for_text(".msg.in", "Cobrança paga: R$ 50,00").await;
    b.screenshot("6-merchant-paid").await;
}

contract!(a_merchant_charges_and_the_customer_pays, |db| async move {
    let Some(b) = Browser::start(&format!("charge-{}", db.store.backend())).await else { return };
    Server::apply_tenant(db, EXAMPLE).await;
    let server = Server::start(db, local_config()).await;
    charge_and_pay(&b, &server).await;

    b.close().await;
    server.stop().await;
});
