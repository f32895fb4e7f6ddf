//! Pix: BR Codes ("Pix copia e cola"), keys, txids, QR images and the gateway that creates
//! charges.
//!
//! Money is [`Cents`](crate::domain::Cents) everywhere; text that reaches a BR Code is folded
//! to printable ASCII first. A charge's txid is derived from its ledger key, so retries never
//! mint a second charge (see [`gateway`]).

pub mod asaas;
pub mod bacen;
pub mod brcode;
pub mod cli;
pub mod fold;
pub mod gateway;
pub mod gateways;
mod http;
pub mod key;
pub mod mercadopago;
pub mod qr;
pub mod refund;
pub mod sandbox;
pub mod secrets;
pub mod settings;
mod tlv;
pub mod txid;

pub use brcode::{BrCode, BrCodeError, Field, StaticCharge, decode};
pub use fold::fold_ascii;
pub use gateway::{
    CancelOutcome, ChargeRef, ChargeRequest, CreatedCharge, GatewayError, Notification, NotificationError,
    NotifiedCharge, Payer, PaymentState, PixGateway, RefundReceipt, RefundRequest, RefundState, WebhookRequest,
};
pub use gateways::Gateways;
pub use key::{PixKey, PixKeyError, PixKeyType};
pub use qr::QrError;
pub use refund::RefundId;
pub use sandbox::SandboxGateway;
pub use secrets::{EnvSecrets, MapSecrets, Secrets};
pub use settings::{GatewayKind, PixSettings, ProviderConfig, RawPix};
pub use tlv::TlvError;
pub use txid::{Txid, TxidError};
