//! The Asaas and Mercado Pago gateways against loopback fakes that speak each provider's
//! documented format, keep what was created, and misbehave on demand: an error status, a
//! hang after the charge was created (past the gateway's timeout), or a connection closed as
//! soon as a request arrives. No database; no assertion on elapsed time.

mod asaas;
mod bacen;
mod mercadopago;

use std::time::Duration;

use balcao::domain::{Cents, LedgerKey, PayerDocument, PhoneE164};
use balcao::pix::{ChargeRequest, Payer, Txid};
use chrono::{DateTime, Utc};

/// The gateway's timeout in the hang cases; a loopback answer takes a tiny fraction of it.
pub const SHORT_TIMEOUT: Duration = Duration::from_secs(1);

/// A charge as `create_charge` asks for it.
pub fn request(key: &str, cents: i64, expires_at: DateTime<Utc>) -> ChargeRequest {
    let key = LedgerKey::from_stored(key.to_owned());
    ChargeRequest {
        txid: Txid::for_static(&key),
        key,
        amount: Cents(cents),
        description: "Corte de cabelo".into(),
        expires_at,
        payer: Payer {
            phone: PhoneE164::parse("+5511999990000").expect("phone"),
            name: Some("Maria".into()),
            document: Some(PayerDocument::parse("529.982.247-25").expect("a CPF")),
        },
        window: balcao::domain::SendWindow::unbounded(),
    }
}
