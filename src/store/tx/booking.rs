//! An appointment's write inside its transaction: fenced by the ledger row it settles, the
//! overlap the database refuses turned into [`BookingError::SlotTaken`], and the release of the
//! rows that described the booking as it was.

use crate::booking::Appointment;
use crate::store::{BookingError, StoreError};

/// What a ledger row settled with an appointment write is about.
pub(crate) fn subject(id: i64) -> String {
    format!("appointment:{id}")
}

/// Whether `e` is the overlap rule refusing a write (PostgreSQL's `EXCLUDE`, SQLite's trigger).
pub(crate) fn is_overlap(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(db)
        if db.code().as_deref() == Some("23P01") || db.message().contains("appointment_overlap"))
}

pub(crate) fn overlap_or(e: sqlx::Error) -> BookingError {
    if is_overlap(&e) {
        return BookingError::SlotTaken;
    }
    BookingError::Store(e.into())
}

/// A database failure inside an appointment's write, as the write reports it.
pub(crate) fn database_failure(e: sqlx::Error) -> BookingError {
    BookingError::Store(StoreError::from(e))
}

/// Runs `$body` (which yields the written appointment) inside a write transaction fenced by
/// `$settle`, then settles the ledger row with it and commits. The whole transaction runs again
/// when the database broke a deadlock by failing it.
macro_rules! fenced_write {
    ($store:expr, $tenant:expr, $settle:expr, $now:expr, |$tx:ident, $pool:ident, $held:ident| $body:expr) => {{
        let mut tries = 1;
        loop {
            let attempt = async {
                $crate::store::writing!($store, $pool => {
                    let mut $tx = $pool.begin_write().await.map_err($crate::store::tx::database_failure)?;
                    let $held: Option<$crate::ledger::Held> = match $settle {
                        Some(settle) => match $crate::store::tx::hold_fence!($tx, $tenant, settle.fence).map_err($crate::store::tx::database_failure)? {
                            Some(held) => Some(held),
                            None => return Err($crate::store::BookingError::Fenced),
                        },
                        None => None,
                    };
                    let appointment: $crate::booking::Appointment = $body;
                    if let (Some(settle), Some(held)) = ($settle, $held) {
                        let result = (settle.render)(&appointment);
                        let settled =
                            $crate::store::tx::settle_in_tx!($tx, $tenant, held, &$crate::store::tx::subject(appointment.id), &result, $now).map_err($crate::store::tx::database_failure)?;
                        if !settled {
                            return Err($crate::store::BookingError::Fenced);
                        }
                    }
                    $tx.commit().await.map_err($crate::store::tx::database_failure)?;
                    if let Some(settle) = $settle {
                        settle.fence.mark_settled();
                    }
                    Ok::<$crate::booking::Appointment, $crate::store::BookingError>(appointment)
                })
            }
            .await;
            match attempt {
                Err(e) if tries < $crate::store::tx::DEADLOCK_RETRIES && $crate::store::tx::is_deadlock(&e) => tries += 1,
                result => break result,
            }
        }
    }};
}
pub(crate) use fenced_write;

/// An appointment with the ledger key that describes it now.
#[derive(sqlx::FromRow)]
pub(crate) struct Keyed {
    #[sqlx(flatten)]
    pub(crate) appointment: Appointment,
    pub(crate) idempotency_key: Option<String>,
}

/// Takes the customer's active appointment `id` for a move or a cancel: locks it (on
/// PostgreSQL), refuses it when it is not theirs or not active (`NotFound`) or already began
/// (`AlreadyStarted`), and supersedes every ledger row that described it (its create key and
/// earlier moves), except the row `held` that this write settles: a repeat of any of them then runs
/// again instead of replaying what is no longer true.
macro_rules! release_active {
    ($tx:ident, $pool:ident, $tenant:expr, $contact:expr, $id:expr, $held:expr, $now:expr) => {{
        let sql = $pool.pick(
            concat!(
                "SELECT ",
                $crate::store::appointments::appointment_columns!(),
                ", idempotency_key FROM appointments
                 WHERE tenant_id = $1 AND contact_id = $2 AND id = $3 AND status IN ('held', 'confirmed')"
            ),
            concat!(
                "SELECT ",
                $crate::store::appointments::appointment_columns!(),
                ", idempotency_key FROM appointments
                 WHERE tenant_id = $1 AND contact_id = $2 AND id = $3 AND status IN ('held', 'confirmed')
                 FOR UPDATE"
            ),
        );
        let current: Option<$crate::store::tx::Keyed> = sqlx::query_as(sql)
            .bind($tenant.0)
            .bind($contact.0)
            .bind($id)
            .fetch_optional(&mut *$tx)
            .await
            .map_err($crate::store::tx::database_failure)?;
        let key = match current {
            None => return Err($crate::store::BookingError::NotFound(format!("active booking {}", $id))),
            Some(c) if c.appointment.starts_at <= $now => {
                return Err($crate::store::BookingError::AlreadyStarted(Box::new(c.appointment)));
            }
            Some(c) => c.idempotency_key,
        };
        $crate::store::tx::supersede_subject!(
            $tx,
            $tenant,
            &$crate::store::tx::subject($id),
            key.as_deref(),
            $held,
            $now
        )
        .map_err($crate::store::tx::database_failure)?;
        // Proposals about it (an old reminder's buttons, a cancellation not yet answered) no
        // longer describe it.
        let stale: Vec<String> = sqlx::query_scalar(
            "UPDATE pending_actions SET status = 'superseded', updated_at = $1, decided_at = $1
             WHERE tenant_id = $2 AND subject = $3 AND status = 'pending'
             RETURNING id",
        )
        .bind($now)
        .bind($tenant.0)
        .bind($crate::store::tx::subject($id))
        .fetch_all(&mut *$tx)
        .await
        .map_err($crate::store::tx::database_failure)?;
        for action in stale {
            let about = format!("action:{action}");
            $crate::store::tx::supersede_subject!(
                $tx,
                $tenant,
                &about,
                None::<&str>,
                None::<$crate::ledger::Held>,
                $now
            )
            .map_err($crate::store::tx::database_failure)?;
        }
    }};
}
pub(crate) use release_active;

/// The locks an appointment write for `contact` with `professional` over `[starts_at, ends_at)`
/// queues behind, in the one order every such write takes them: the customer, then the
/// professional's UTC days the block touches, earliest first.
///
/// Two writes that the overlap rule could set against each other share one of these (two
/// overlapping blocks of one professional share a day; one customer's writes share the
/// customer), so the later one waits for the earlier to commit and then meets its row as a plain
/// conflict. Without them, PostgreSQL's `EXCLUDE` check made racing inserts wait on each other's
/// uncommitted rows, a cycle it broke by failing one with a deadlock. The customer's lock also
/// makes the customer-overlap check (a read) hold under concurrency.
pub(crate) fn slot_locks(
    tenant: crate::domain::TenantId,
    contact: crate::domain::ContactId,
    professional: i64,
    starts_at: chrono::DateTime<chrono::Utc>,
    ends_at: chrono::DateTime<chrono::Utc>,
) -> Vec<i64> {
    let mut keys = vec![lock_key(&format!("booking:customer:{}:{}", tenant.0, contact.0))];
    let last = (ends_at - chrono::TimeDelta::microseconds(1)).max(starts_at).date_naive();
    let mut day = starts_at.date_naive();
    while day <= last {
        keys.push(lock_key(&format!("booking:professional:{}:{professional}:{day}", tenant.0)));
        day = match day.succ_opt() {
            Some(next) => next,
            None => break,
        };
    }
    keys
}

/// A 64-bit lock name from `name`. A collision only makes two unrelated writes wait in turn.
fn lock_key(name: &str) -> i64 {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(name.as_bytes());
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&digest[..8]);
    i64::from_be_bytes(bytes)
}

/// Queued behind [`slot_locks`], racing writes no longer deadlock; a deadlock with some other
/// transaction is still broken by the database failing one, and that write runs again.
pub(crate) const DEADLOCK_RETRIES: u32 = 3;

pub(crate) fn is_deadlock(e: &BookingError) -> bool {
    matches!(e, BookingError::Store(StoreError::Database(sqlx::Error::Database(db)))
        if matches!(db.code().as_deref(), Some("40P01" | "40001")))
}

#[cfg(test)]
mod tests {
    use chrono::{TimeZone, Utc};

    use super::*;
    use crate::domain::{ContactId, TenantId};

    #[test]
    fn a_write_locks_its_customer_then_each_day_its_block_touches() {
        let at = |d: u32, h: u32, m: u32| Utc.with_ymd_and_hms(2026, 3, d, h, m, 0).single().expect("an instant");
        let (tenant, ana, bia) = (TenantId(1), ContactId(7), ContactId(8));
        let same_day = slot_locks(tenant, ana, 3, at(11, 17, 0), at(11, 17, 40));
        assert_eq!(same_day.len(), 2, "the customer and one day");
        // Ending at midnight does not touch the next day; crossing it does.
        assert_eq!(slot_locks(tenant, ana, 3, at(11, 23, 30), at(12, 0, 0)).len(), 2);
        let across = slot_locks(tenant, ana, 3, at(11, 23, 30), at(12, 0, 10));
        assert_eq!(across.len(), 3);
        assert_eq!(across[..2], same_day[..], "the customer first, then days in order");
        // Another customer of the same professional that day shares the day's lock only.
        let other = slot_locks(tenant, bia, 3, at(11, 9, 0), at(11, 9, 30));
        assert_ne!(other[0], same_day[0]);
        assert_eq!(other[1], same_day[1]);
        // Another professional, or another tenant's, is another lock.
        assert_ne!(slot_locks(tenant, ana, 4, at(11, 17, 0), at(11, 17, 40))[1], same_day[1]);
        assert_ne!(slot_locks(TenantId(2), ana, 3, at(11, 17, 0), at(11, 17, 40))[1], same_day[1]);
    }
}
