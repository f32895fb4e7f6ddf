//! Console passwords: argon2id hashes (PHC strings) and their checks, a few at a time.
//!
//! Invariants: a check runs on a blocking thread, holds no database connection, and only
//! half the cores' worth run at once ([`PasswordChecks`]), so logins never take the CPU or the
//! connections the workers and the intake need; a login beyond a short line is turned away
//! before it touches the database. An unknown e-mail is checked against [`DUMMY_HASH`], so
//! both answers take as long.

use std::sync::Arc;

use argon2::password_hash::phc::PasswordHash;
use argon2::{Argon2, PasswordHasher, PasswordVerifier};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::error::ConsoleError;

/// Hashes a password with argon2id and a random salt (PHC string).
pub fn hash_password(password: &str) -> anyhow::Result<String> {
    let hash = Argon2::default()
        .hash_password(password.as_bytes())
        .map_err(|e| anyhow::anyhow!("hashing the password failed: {e}"))?;
    Ok(hash.to_string())
}

fn password_matches(password: &str, stored: &str) -> bool {
    PasswordHash::new(stored).is_ok_and(|hash| Argon2::default().verify_password(password.as_bytes(), &hash).is_ok())
}

/// Logins waiting for a password check, beyond those being checked, before more are turned
/// away at once (503): a flood then costs a queue of this length, not memory or time per login.
const LOGINS_WAITING: usize = 32;

/// Password checks (argon2: tens of milliseconds of CPU and 19 MiB each) run a few at a time,
/// half the cores, so logins never take the CPU the workers and the intake need; a login
/// holds a place in line ([`Self::admit`]) from its start, and beyond the line it is refused
/// before it touches the database.
#[derive(Clone)]
pub struct PasswordChecks {
    running: Arc<Semaphore>,
    line: Arc<Semaphore>,
}

impl Default for PasswordChecks {
    fn default() -> Self {
        let cores = std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get);
        let running = (cores / 2).max(1);
        Self { running: Arc::new(Semaphore::new(running)), line: Arc::new(Semaphore::new(running + LOGINS_WAITING)) }
    }
}

impl PasswordChecks {
    /// A place in line for one login, if there is one.
    pub fn admit(&self) -> Option<OwnedSemaphorePermit> {
        self.line.clone().try_acquire_owned().ok()
    }

    /// Whether `password` matches the PHC string `stored` (`None`: an unknown e-mail, checked
    /// against [`DUMMY_HASH`] all the same), checked on a blocking thread once one of the few
    /// places is free. The place moves into the check: a request dropped meanwhile (its client
    /// gone, the timeout) frees it only when the hash is done, so hashes in flight never exceed
    /// the places.
    pub async fn check(&self, password: String, stored: Option<String>) -> Result<bool, ConsoleError> {
        let running = self.running.clone().acquire_owned().await.map_err(|e| ConsoleError::Internal(e.into()))?;
        tokio::task::spawn_blocking(move || {
            let _running = running;
            password_matches(&password, stored.as_deref().unwrap_or(&DUMMY_HASH))
        })
        .await
        .map_err(|e| ConsoleError::Internal(e.into()))
    }
}

/// A hash of a random password nobody knows: verifying against it costs what a real check costs.
/// First computed inside a check, on a blocking thread.
static DUMMY_HASH: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| hash_password(&uuid::Uuid::new_v4().to_string()).unwrap_or_default());
