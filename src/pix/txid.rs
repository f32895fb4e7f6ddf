//! The Pix transaction id (`txid`).
//!
//! Invariants: a [`Txid`] is 1 to 35 ASCII letters and digits. Bacen splits that range: a
//! static BR Code carries 1..=25 in field 62-05, a charge created through the API (`cob`)
//! uses 26..=35, so the two can never collide.
//!
//! Both derivations are deterministic, so a retry after a crash or a timeout finds the same
//! txid instead of minting a second charge:
//! - [`Txid::for_static`]: the first 25 hex digits of SHA-256 of the ledger key;
//! - [`Txid::for_cob`]: 32 hex digits of HMAC-SHA256(secret, ledger key), so that no one
//!   holding the key's inputs can predict or enumerate our txids.

use std::fmt;

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use crate::domain::LedgerKey;

/// Bacen's `[a-zA-Z0-9]{1,35}` upper bound.
pub const MAX_TXID_LEN: usize = 35;
/// Field 62-05 of a static BR Code holds at most 25 characters.
pub const MAX_STATIC_TXID_LEN: usize = 25;
/// 128 bits in hex: inside the API's 26..=35 and far from any collision.
const COB_TXID_LEN: usize = 32;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Txid(String);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TxidError {
    #[error("a txid has 1 to 35 characters; {0:?} has {1}")]
    Length(String, usize),
    #[error("a txid has only letters and digits (A-Z, a-z, 0-9); {0:?} has other characters")]
    Charset(String),
}

impl Txid {
    pub fn parse(raw: &str) -> Result<Self, TxidError> {
        if !raw.bytes().all(|b| b.is_ascii_alphanumeric()) {
            return Err(TxidError::Charset(raw.to_owned()));
        }
        if !(1..=MAX_TXID_LEN).contains(&raw.len()) {
            return Err(TxidError::Length(raw.to_owned(), raw.len()));
        }
        Ok(Self(raw.to_owned()))
    }

    /// The txid of a static BR Code for one ledger key: same key, same txid.
    pub fn for_static(key: &LedgerKey) -> Self {
        let mut digest = key.hex_digest();
        digest.truncate(MAX_STATIC_TXID_LEN);
        Self(digest)
    }

    /// The txid of an API charge (`PUT /cob/{txid}`) for one ledger key, keyed by `secret`.
    pub fn for_cob(key: &LedgerKey, secret: &[u8]) -> Self {
        // HMAC accepts keys of any length, so this cannot fail.
        let mut mac =
            Hmac::<Sha256>::new_from_slice(secret).unwrap_or_else(|_| unreachable!("hmac takes any key length"));
        mac.update(key.as_str().as_bytes());
        let mut digest = hex::encode(mac.finalize().into_bytes());
        digest.truncate(COB_TXID_LEN);
        Self(digest)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether it fits field 62-05 of a static BR Code.
    pub fn fits_static(&self) -> bool {
        self.0.len() <= MAX_STATIC_TXID_LEN
    }
}

impl fmt::Display for Txid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(raw: &str) -> LedgerKey {
        LedgerKey::from_stored(raw.to_owned())
    }

    #[test]
    fn parse_checks_charset_and_length() {
        assert_eq!(Txid::parse("Pedido123").unwrap().as_str(), "Pedido123");
        assert!(Txid::parse(&"a".repeat(35)).is_ok());
        assert!(matches!(Txid::parse(&"a".repeat(36)), Err(TxidError::Length(_, 36))));
        assert!(matches!(Txid::parse(""), Err(TxidError::Length(_, 0))));
        for bad in ["***", "RP1234-2019", "com espaco", "pedidoç"] {
            assert!(matches!(Txid::parse(bad), Err(TxidError::Charset(_))), "{bad}");
        }
    }

    #[test]
    fn static_txid_is_deterministic_and_fits_field_62_05() {
        let a = Txid::for_static(&key("pix_charge/v1/abc"));
        assert_eq!(a, Txid::for_static(&key("pix_charge/v1/abc")));
        assert_ne!(a, Txid::for_static(&key("pix_charge/v1/abd")));
        assert_eq!(a.as_str().len(), MAX_STATIC_TXID_LEN);
        assert!(a.fits_static());
        assert_eq!(Txid::parse(a.as_str()), Ok(a));
    }

    #[test]
    fn cob_txid_is_keyed_deterministic_and_in_the_api_range() {
        let k = key("pix_charge/v1/abc");
        let a = Txid::for_cob(&k, b"secret");
        assert_eq!(a, Txid::for_cob(&k, b"secret"));
        assert_ne!(a, Txid::for_cob(&k, b"other secret"));
        assert_ne!(a, Txid::for_cob(&key("pix_charge/v1/abd"), b"secret"));
        assert!((26..=35).contains(&a.as_str().len()));
        assert!(!a.fits_static());
        assert_eq!(Txid::parse(a.as_str()), Ok(a));
    }
}
