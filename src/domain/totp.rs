//! Time-based one-time passwords (RFC 6238 over RFC 4226): the console's optional second
//! factor, as authenticator apps compute them (HMAC-SHA1, 30-second steps, 6 digits).
//!
//! Invariant: a code is accepted for the current step or the one before or after (clock
//! drift), and the caller spends the step it matched, so a code works once.

use std::fmt;

use hmac::{Hmac, KeyInit, Mac};
use sha1::Sha1;

/// Seconds per step.
const STEP: i64 = 30;
const DIGITS: u32 = 6;
/// Secret bytes (160 bits, RFC 4226's recommendation).
const SECRET_BYTES: usize = 20;

/// A TOTP secret; its `Debug` shows nothing of it.
#[derive(Clone, PartialEq, Eq)]
pub struct TotpSecret(Vec<u8>);

impl TotpSecret {
    pub fn random() -> Self {
        Self((0..SECRET_BYTES).map(|_| rand::random::<u8>()).collect())
    }

    /// From its base32 form (as stored, and as apps show it).
    pub fn parse(base32: &str) -> Option<Self> {
        let cleaned: String = base32.chars().filter(|c| !c.is_whitespace() && *c != '=').collect();
        let bytes = data_encoding::BASE32_NOPAD.decode(cleaned.to_ascii_uppercase().as_bytes()).ok()?;
        (bytes.len() >= 10).then_some(Self(bytes))
    }

    pub fn base32(&self) -> String {
        data_encoding::BASE32_NOPAD.encode(&self.0)
    }

    /// The `otpauth://` URI an authenticator app scans.
    pub fn uri(&self, issuer: &str, account: &str) -> String {
        let enc = |s: &str| {
            s.bytes()
                .map(|b| match b {
                    b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'@' => {
                        (b as char).to_string()
                    }
                    _ => format!("%{b:02X}"),
                })
                .collect::<String>()
        };
        format!(
            "otpauth://totp/{}:{}?secret={}&issuer={}&algorithm=SHA1&digits={DIGITS}&period={STEP}",
            enc(issuer),
            enc(account),
            self.base32(),
            enc(issuer)
        )
    }

    /// The code of step `step`.
    pub fn code_at(&self, step: i64) -> String {
        let mut mac =
            Hmac::<Sha1>::new_from_slice(&self.0).unwrap_or_else(|_| unreachable!("hmac takes any key length"));
        mac.update(&step.to_be_bytes());
        let digest = mac.finalize().into_bytes();
        let offset = usize::from(digest[19] & 0x0f);
        let binary =
            u32::from_be_bytes([digest[offset] & 0x7f, digest[offset + 1], digest[offset + 2], digest[offset + 3]]);
        format!("{:0width$}", binary % 10u32.pow(DIGITS), width = DIGITS as usize)
    }

    /// The step `code` matches at Unix time `now` (this step, or one either side), if any.
    pub fn verify(&self, code: &str, now: i64) -> Option<i64> {
        let code: String = code.chars().filter(|c| !c.is_whitespace()).collect();
        if code.len() != DIGITS as usize || !code.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let step = now.div_euclid(STEP);
        [step, step - 1, step + 1].into_iter().find(|s| {
            // Constant time per comparison: the code's digits do not leak by timing.
            subtle::ConstantTimeEq::ct_eq(self.code_at(*s).as_bytes(), code.as_bytes()).into()
        })
    }
}

impl fmt::Debug for TotpSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TotpSecret([redacted])")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_rfc_6238_sha1_vectors() {
        // RFC 6238 appendix B: the ASCII key "12345678901234567890", 8-digit codes; ours are
        // their last six digits.
        let secret = TotpSecret(b"12345678901234567890".to_vec());
        for (time, code) in
            [(59, "287082"), (1_111_111_109, "081804"), (1_234_567_890, "005924"), (2_000_000_000, "279037")]
        {
            assert_eq!(secret.code_at(time / STEP), code, "{time}");
            assert_eq!(secret.verify(code, time), Some(time / STEP));
        }
        assert_eq!(secret.verify("287082", 59 + 2 * STEP), None, "two steps late");
        assert_eq!(secret.verify("28708", 59), None);
        let round = TotpSecret::parse(&secret.base32().to_lowercase()).unwrap();
        assert_eq!(round, secret);
        assert!(secret.uri("Balcão", "ana@x.com").starts_with("otpauth://totp/Balc%C3%A3o:ana@x.com?secret=GEZDGNBV"));
    }
}
