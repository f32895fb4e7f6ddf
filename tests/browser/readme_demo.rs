//! The README's demo, step by step as it is written there (numbers, words and buttons), in
//! Chromium: a booking, a move, a cancellation and the address as the customer; a Pix charge
//! as the business, paid from the simulator; then the conversation in the console, each turn
//! beside the messages it answered. Screenshots of each step land in
//! `target/browser-artifacts/readme-*.png` (the README's pictures come from there).

use serde_json::json;

use crate::contract;
use crate::harness::{Browser, Server, local_config};
use crate::simulator::{EXAMPLE, SLUG, connected, say};

/// The README's customer, `+55 11 90000-0001`: the simulator's default number.
const CUSTOMER: &str = "5511900000001";
const STAFF: &str = "5511988887777";

/// The first bot message after `after` whose text contains `text`; its id.
async fn answer(b: &Browser, after: i64, text: &str) -> i64 {
    let script = "const m = [...document.querySelectorAll('.msg.in')].filter(e => \
                  Number(e.dataset.id) > arguments[0] && e.textContent.includes(arguments[1])); \
                  return m.length ? Number(m[0].dataset.id) : null;";
    let id = b.wait_until(&format!("{text:?} after message {after}"), script, vec![json!(after), json!(text)]).await;
    id.as_i64().expect("a message id")
}

/// Taps the choice of bot message `id` whose title starts with `title` (`None`: the `n`-th).
async fn tap(b: &Browser, id: i64, title: Option<&str>, n: usize) {
    let script = "const all = [...document.querySelectorAll(`.msg.in[data-id=\"${arguments[0]}\"] \
                  :is(button.reply, .list-row)`)]; \
                  const pick = arguments[1] === null ? all[arguments[2]] \
                  : all.find(e => e.textContent.trim().startsWith(arguments[1])); \
                  if (!pick) return null; pick.click(); return true;";
    let what = format!("the choice {title:?} ({n}) of message {id}");
    b.wait_until(&what, script, vec![json!(id), json!(title), json!(n)]).await;
}

contract!(the_readme_demo_runs_end_to_end_in_the_browser, |db| async move {
    let Some(b) = Browser::start(&format!("readme-{}", db.store.backend())).await else { return };
    Server::apply_tenant(db, EXAMPLE).await;
    let server = Server::start(db, local_config()).await;
    b.goto(&format!("{}/simulator?tenant={SLUG}", server.url)).await;
    connected(&b, CUSTOMER).await;

    // A booking: oi, Agendar, Corte masculino, Zé, a day, a time, Confirmar.
    say(&b, "oi").await;
    let menu = answer(&b, 0, "Como posso ajudar?").await;
    tap(&b, menu, Some("Agendar"), 0).await;
    let services = answer(&b, menu, "Qual serviço").await;
    tap(&b, services, Some("Corte masculino"), 0).await;
    let pros = answer(&b, services, "Com quem").await;
    tap(&b, pros, Some("Zé"), 0).await;
    let days = answer(&b, pros, "Para qual dia?").await;
    tap(&b, days, None, 0).await;
    let times = answer(&b, days, "Horários livres").await;
    tap(&b, times, None, 0).await;
    let offer = answer(&b, times, "Confirma Corte masculino com Zé").await;
    b.screenshot("1-booking-offer").await;
    tap(&b, offer, Some("Confirmar"), 0).await;
    let booked = answer(&b, offer, "Pronto! Corte masculino com Zé marcado").await;
    b.screenshot("2-booked").await;

    // A move: "remarcar", the booking, another day, a time, Confirmar.
    say(&b, "remarcar").await;
    let mine = answer(&b, booked, "Qual horário você quer remarcar?").await;
    tap(&b, mine, None, 0).await;
    let days = answer(&b, mine, "Para qual dia você quer remarcar?").await;
    tap(&b, days, None, 1).await;
    let times = answer(&b, days, "Horários livres").await;
    tap(&b, times, None, 0).await;
    let offer = answer(&b, times, "Confirma a remarcação de Corte masculino com Zé").await;
    tap(&b, offer, Some("Confirmar"), 0).await;
    let moved = answer(&b, offer, "Pronto, seu horário agora é").await;
    b.screenshot("3-moved").await;

    // A cancellation: Meus horários, the booking, Cancelar horário, Sim, cancelar.
    tap(&b, moved, Some("Meus horários"), 0).await;
    let mine = answer(&b, moved, "Toque em um horário").await;
    tap(&b, mine, None, 0).await;
    let chosen = answer(&b, mine, "O que você quer fazer?").await;
    tap(&b, chosen, Some("Cancelar horário"), 0).await;
    let sure = answer(&b, chosen, "Confirma o cancelamento").await;
    tap(&b, sure, Some("Sim, cancelar"), 0).await;
    let cancelled = answer(&b, sure, "foi cancelado").await;

    // The address: a location pin, then the text with the menu.
    say(&b, "endereço").await;
    answer(&b, cancelled, "Rua Augusta").await;
    b.wait_for(".msg.in[data-type=\"location\"] a.location").await;
    b.screenshot("4-address").await;

    // A charge, as the business: oi, Nova cobrança, 50, Ana (who just wrote), a description,
    // Confirmar.
    b.click("#as-staff").await;
    connected(&b, STAFF).await;
    say(&b, "oi").await;
    let staff_menu = answer(&b, 0, "Menu da equipe").await;
    tap(&b, staff_menu, Some("Nova cobrança"), 0).await;
    let amount = answer(&b, staff_menu, "Qual o valor").await;
    say(&b, "50").await;
    let to = answer(&b, amount, "Para quem é a cobrança?").await;
    tap(&b, to, Some("Ana"), 0).await;
    let description = answer(&b, to, "descrição").await;
    say(&b, "Corte e barba").await;
    let offer = answer(&b, description, "Enviar uma cobrança Pix de R$ 50,00 para +5511900000001?").await;
    b.screenshot("5-charge-offer").await;
    tap(&b, offer, Some("Confirmar"), 0).await;
    answer(&b, offer, "Cobrança nº 1 de R$ 50,00 enviada").await;

    // Paid from the simulator, as the customer: Copiar, Marcar como pago.
    b.click("#as-customer").await;
    connected(&b, CUSTOMER).await;
    b.wait_for(".copia-e-cola").await;
    b.wait_for("button.copy").await;
    b.screenshot("6-customer-pix").await;
    b.click("button.mark-paid[data-charge]").await;
    b.wait_for_text(".msg.in", "Recebemos seu pagamento de R$ 50,00").await;
    b.click("#as-staff").await;
    connected(&b, STAFF).await;
    b.wait_for_text(".msg.in", "Cobrança paga: R$ 50,00").await;
    b.screenshot("7-merchant-paid").await;

    crate::console::readme_console_step(&b, &server, db, CUSTOMER).await;

    b.close().await;
    server.stop().await;
});
