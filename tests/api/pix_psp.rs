//! The Asaas, Mercado Pago and Bacen gateways against loopback fakes that speak each provider's
//! documented format, keep what was created (charges, and refunds per payment), and misbehave
//! on demand: an error status, a hang after the charge or refund was made (past the gateway's
//! timeout), or a connection closed as soon as a request arrives. No database; no assertion on
//! elapsed time.

mod asaas;
mod bacen;
mod mercadopago;

use std::time::Duration;

use balcao::domain::{Cents, LedgerKey, PayerDocument, PhoneE164, SendWindow};
use balcao::pix::{ChargeRef, ChargeRequest, CreatedCharge, Payer, RefundId, RefundRequest, Txid};
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

/// The charge as the caller records it after `create`.
pub fn charge_ref(created: &CreatedCharge) -> ChargeRef {
    ChargeRef { txid: created.txid.as_str().to_owned(), provider_ref: created.provider_ref.clone() }
}

/// A refund of `cents` of `charge` under the ledger key `key`, as the money side asks for it:
/// no end-to-end id, no provider id yet, no lease behind it.
pub fn refund(key: &str, charge: &ChargeRef, cents: i64) -> RefundRequest {
    RefundRequest {
        charge: charge.clone(),
        end_to_end_id: None,
        id: RefundId::for_key(&LedgerKey::from_stored(key.to_owned())),
        provider_ref: None,
        amount: Cents(cents),
        window: SendWindow::unbounded(),
    }
}
