//! The idempotency key of one logical side effect (`crate::ledger` derives it from business
//! identity, never from a `tool_use_id`); the same key travels to the payment provider.

use std::fmt;

use sha2::{Digest, Sha256};

/// Identifies one logical side effect.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LedgerKey(String);

impl LedgerKey {
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// A short, stable token derived from the key for outside systems that limit length or
    /// alphabet (Pix `txid`: 26–35 of `[A-Za-z0-9]`).
    pub fn hex_digest(&self) -> String {
        hex::encode(Sha256::digest(self.0.as_bytes()))
    }

    pub fn from_stored(raw: String) -> Self {
        Self(raw)
    }
}

impl fmt::Display for LedgerKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
