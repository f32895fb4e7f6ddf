//! Our id for a refund ("devolução") at the provider; the request and what the provider says
//! of it are in [`super::gateway`].
//!
//! Invariants:
//! - a [`RefundId`] is derived from the refund's ledger key (32 hex digits of its SHA-256), so
//!   every attempt of one refund sends the provider the same id: Bacen's devolução `{id}`,
//!   Mercado Pago's `X-Idempotency-Key`, the marker Asaas keeps in the refund's description;
//! - after an unknown outcome the caller asks [`super::PixGateway::find_refund`] before sending
//!   again, exactly as for charges; a provider that does not deduplicate (Asaas) gets the same
//!   late-create wait;
//! - the amount is always sent: a provider that reads "no value" as "everything" never
//!   refunds more than was asked.

use std::fmt;

use crate::domain::LedgerKey;

/// Hex digits in a refund id: inside Bacen's `[a-zA-Z0-9]{1,35}`.
const REFUND_ID_LEN: usize = 32;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RefundId(String);

impl RefundId {
    /// The refund id of ledger key `key`: same key, same id.
    pub fn for_key(key: &LedgerKey) -> Self {
        let mut digest = key.hex_digest();
        digest.truncate(REFUND_ID_LEN);
        Self(digest)
    }

    /// An id read back from our own records.
    pub fn from_stored(raw: String) -> Self {
        Self(raw)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for RefundId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refund_ids_are_deterministic_and_fit_bacen() {
        let key = LedgerKey::from_stored("execute_action/v1/abc".into());
        let id = RefundId::for_key(&key);
        assert_eq!(id, RefundId::for_key(&key));
        assert_ne!(id, RefundId::for_key(&LedgerKey::from_stored("execute_action/v1/abd".into())));
        assert_eq!(id.as_str().len(), REFUND_ID_LEN);
        assert!(id.as_str().bytes().all(|b| b.is_ascii_alphanumeric()));
    }
}
