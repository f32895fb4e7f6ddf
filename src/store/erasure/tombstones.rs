//! Erasure tombstones: what lets the intake tell a redelivery of an erased person's old
//! message (dropped) from their first message after the erasure (a new, empty contact),
//! keeping only keyed hashes of their identities ([`crate::domain::PrivacyKey::identities`]).

use chrono::{DateTime, Utc};

use crate::domain::TenantId;
use crate::store::tx::conversation::LATEST_ERASURE;
use crate::store::{Store, StoreResult, reading};

/// What the intake may do with a message whose contact is not stored yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// Store it (and create or update its contact).
    Open,
    /// Its id is stored already: a redelivery, acknowledged without touching the contact.
    Duplicate,
    /// One of its sender's identities was erased at this instant.
    Erased(DateTime<Utc>),
}

#[allow(async_fn_in_trait)]
pub trait TombstoneStore {
    /// Checked before a message creates or updates a contact: `message_id` is the stored
    /// (hashed) id, `identities` the sender's tombstone forms (at most three are read).
    async fn intake_gate(&self, tenant: TenantId, message_id: &str, identities: &[String]) -> StoreResult<Gate>;
}

impl TombstoneStore for Store {
    async fn intake_gate(&self, tenant: TenantId, message_id: &str, identities: &[String]) -> StoreResult<Gate> {
        let stored: Option<i64> = reading!(self, pool => {
            sqlx::query_scalar("SELECT id FROM inbound_messages WHERE tenant_id = $1 AND provider_message_id = $2")
                .bind(tenant.0)
                .bind(message_id)
                .fetch_optional(pool)
                .await
        })?;
        if stored.is_some() {
            return Ok(Gate::Duplicate);
        }
        // A contact has at most three identities (number, user id, username): one read.
        let [a, b, c] = [0, 1, 2].map(|i| identities.get(i));
        let latest: Option<DateTime<Utc>> = match a {
            None => None,
            Some(a) => reading!(self, pool => {
                sqlx::query_scalar(LATEST_ERASURE)
                .bind(tenant.0)
                .bind(a)
                .bind(b.unwrap_or(a))
                .bind(c.unwrap_or(a))
                .fetch_optional(pool)
                .await
            })?,
        };
        Ok(latest.map_or(Gate::Open, Gate::Erased))
    }
}

/// Records the tombstones of an erasure in its transaction (a later erasure of the same
/// identity moves the instant forward).
macro_rules! tombstones_in_tx {
    ($tx:ident, $tenant:expr, $identities:expr, $now:expr) => {
        async {
            for identity in $identities {
                sqlx::query(
                    "INSERT INTO erasures (tenant_id, identity, erased_at) VALUES ($1, $2, $3)
                     ON CONFLICT (tenant_id, identity) DO UPDATE SET erased_at = excluded.erased_at",
                )
                .bind($tenant.0)
                .bind(identity)
                .bind($now)
                .execute(&mut *$tx)
                .await?;
            }
            Ok::<_, $crate::store::StoreError>(())
        }
        .await
    };
}
pub(crate) use tombstones_in_tx;
