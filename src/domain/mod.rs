//! The floor: values that checked themselves when they were built, and helpers with no I/O
//! (ids, the ids a button carries, money in cents, E.164 phones, payers' CPF/CNPJ, secrets,
//! idempotency keys, the one-word commands, time helpers). Everything may import it; it imports nothing of ours.

mod click;
mod document;
mod ids;
pub mod keyword;
mod ledger_key;
mod money;
mod phone;
mod privacy_key;
mod redact;
mod secret;
mod time;
mod totp;
mod window;

pub use click::{ActionId, ClickId, Decision, MENU_BOOK, MENU_MINE};
pub use document::{DocumentError, DocumentKind, PayerDocument};
pub use ids::{ContactId, ConversationId, JobId, OutboundId, TenantId};
pub use ledger_key::LedgerKey;
pub use money::{Cents, MoneyError};
pub use phone::{PhoneE164, PhoneError};
pub use privacy_key::{MESSAGE_ID_PREFIX, PrivacyKey};
pub use redact::Needles;
pub use secret::{DatabaseUrl, Secret};
pub use time::{Backoff, GaveUp, Try, retried, to_delta};
pub use totp::TotpSecret;
pub use window::SendWindow;
