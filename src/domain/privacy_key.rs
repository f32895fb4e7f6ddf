//! The keyed hash that lets us keep what identifies a message or a person without keeping the
//! identifier: WhatsApp message ids (Meta's wamids are base64 and embed the phone number) and
//! the identities an erasure's tombstone remembers.
//!
//! Invariant: a raw wamid never passes the webhook parser or the sender; every id stored,
//! compared or logged is `PrivacyKey::message_id` of it, stable for a deployment's key, so
//! deduplication, status updates and click contexts keep working, and an erasure leaves
//! nothing that can be read back into a number. The key lives outside the database (derived
//! from the Meta app secret unless `BALCAO_PRIVACY_KEY` sets one), so a copy of the database
//! alone cannot test candidate numbers against a tombstone.

use std::fmt;

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use super::{PhoneE164, Secret};

/// Prefix of every hashed message id; anything else stored is a raw id from before hashing.
pub const MESSAGE_ID_PREFIX: &str = "m1:";

#[derive(Clone)]
pub struct PrivacyKey([u8; 32]);

impl PrivacyKey {
    /// The key derived from a secret (the app secret, or a dedicated one).
    pub fn derive(secret: &Secret) -> Self {
        Self(mac(secret.expose().as_bytes(), b"balcao/privacy-key/v1"))
    }

    /// The stored form of a provider message id: `m1:` and 32 hex digits (128 bits of the
    /// HMAC-SHA256), the same for the same id, unrelated for any other (an id that merely looks
    /// hashed is hashed too, so no sender can pick a stored id).
    pub fn message_id(&self, raw: &str) -> String {
        let digest = mac(&self.0, format!("wamid:{raw}").as_bytes());
        format!("{MESSAGE_ID_PREFIX}{}", hex::encode(&digest[..16]))
    }

    /// The tombstone forms of a contact's identities: its number (either spelling of a
    /// Brazilian mobile gives the same), its business-scoped user id and its username.
    pub fn identities(&self, wa_id: Option<&PhoneE164>, user_id: Option<&str>, username: Option<&str>) -> Vec<String> {
        let number = wa_id.map(PhoneE164::match_key);
        [("wa", number.as_deref()), ("user", user_id), ("username", username)]
            .into_iter()
            .filter_map(|(kind, value)| value.filter(|v| !v.is_empty()).map(|v| self.identity(kind, v)))
            .collect()
    }

    fn identity(&self, kind: &str, value: &str) -> String {
        hex::encode(mac(&self.0, format!("identity:{kind}:{value}").as_bytes()))
    }
}

fn mac(key: &[u8], message: &[u8]) -> [u8; 32] {
    // HMAC accepts keys of any length, so this cannot fail.
    let mut mac = Hmac::<Sha256>::new_from_slice(key).unwrap_or_else(|_| unreachable!("hmac takes any key length"));
    mac.update(message);
    mac.finalize().into_bytes().into()
}

impl fmt::Debug for PrivacyKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PrivacyKey([redacted])")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_ids_are_stable_keyed_and_idempotent() {
        let key = PrivacyKey::derive(&Secret::new("a"));
        let raw = "wamid.HBgNNTUxMTk4NzY1NDMyMRUCABIYFjNFQjBDMEQ3";
        let id = key.message_id(raw);
        assert_eq!(id, key.message_id(raw));
        assert_ne!(id, key.message_id(&id));
        assert!(id.starts_with(MESSAGE_ID_PREFIX) && id.len() == 35);
        assert!(!id.contains("HBgN"));
        assert_ne!(id, PrivacyKey::derive(&Secret::new("b")).message_id(raw));
        assert_ne!(key.identity("wa", "5511987654321"), key.identity("user", "5511987654321"));
        let nine = PhoneE164::parse("+5511987654321").ok();
        let eight = PhoneE164::parse("+551187654321").ok();
        assert_eq!(key.identities(nine.as_ref(), None, None), key.identities(eight.as_ref(), None, Some("")));
    }
}
