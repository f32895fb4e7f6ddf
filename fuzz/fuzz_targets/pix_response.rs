//! What the Pix providers answer: Asaas, Mercado Pago and Bacen API Pix payment lookups, their
//! notification bodies and the Bacen token endpoint. The first byte picks the parser, the
//! second the HTTP status; the rest is the body.
#![no_main]

use balcao::domain::{Cents, LedgerKey, PhoneE164};
use balcao::pix::{ChargeRequest, Payer, Txid, asaas, bacen, mercadopago};
use chrono::{TimeZone, Utc};
use libfuzzer_sys::fuzz_target;
use reqwest::StatusCode;

const STATUSES: [u16; 12] = [200, 201, 204, 302, 400, 401, 403, 404, 409, 429, 500, 503];

fuzz_target!(|data: &[u8]| {
    let [which, status, body @ ..] = data else { return };
    let status = StatusCode::from_u16(STATUSES[usize::from(*status) % STATUSES.len()]).expect("a status");
    let now = Utc.with_ymd_and_hms(2026, 12, 3, 12, 0, 0).unwrap();
    let txid = Txid::parse("7f3a9c2e1b4d5f6a7b8c9d0e1f2a3b4c").expect("a txid");
    match which % 6 {
        0 => drop(asaas::read_payment(status, body)),
        1 => drop(asaas::read_event(body)),
        2 => {
            let req = ChargeRequest {
                key: LedgerKey::from_stored("propose_charge/v1/fuzz".into()),
                txid: txid.clone(),
                amount: Cents(5000),
                description: "Corte".into(),
                expires_at: now,
                payer: Payer { phone: PhoneE164::parse("+5511999990000").expect("a phone"), name: None },
                window: balcao::domain::SendWindow::unbounded(),
            };
            drop(mercadopago::read_payment(status, body, &req));
        }
        3 => drop(bacen::read_cob(status, body, &txid, Cents(5000), now)),
        4 => drop(bacen::read_callback(body)),
        _ => drop(bacen::read_token_answer(body)),
    }
});
