//! Appointments. The overlap rule between professionals' appointments lives in the schema (see
//! the migrations); the appointment's write (`super::tx::fenced_write`) turns its violation
//! into [`BookingError::SlotTaken`].
//!
//! Each write may carry the ledger row it settles ([`SettleWith`]): the row's fence is checked
//! first (locking the row on PostgreSQL), then the effect, the supersession of every row that
//! described the appointment before, and the outcome commit in one transaction. A crash leaves
//! the effect and its outcome together or neither; a worker that lost the row writes nothing.

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::tx::{database_failure, fenced_write, overlap_or, release_active, slot_locks};

/// Inside an appointment's write: fails it with [`BookingError::CustomerOverlap`] when another
/// active appointment of `contact` (not `id`, nor the one keyed `key`, the write's own replay)
/// overlaps the block.
macro_rules! refuse_customer_overlap {
    ($tx:ident, $tenant:expr, $contact:expr, $from:expr, $to:expr, $key:expr, $id:expr) => {{
        let own: Option<Appointment> = sqlx::query_as(concat!(
            "SELECT ",
            appointment_columns!(),
            " FROM appointments
             WHERE tenant_id = $1 AND contact_id = $2 AND status IN ('held', 'confirmed')
               AND starts_at < $4 AND ends_at > $3
               AND (idempotency_key IS NULL OR idempotency_key <> $5) AND id <> $6
             ORDER BY starts_at LIMIT 1"
        ))
        .bind($tenant.0)
        .bind($contact.0)
        .bind($from)
        .bind($to)
        .bind($key)
        .bind($id)
        .fetch_optional(&mut *$tx)
        .await
        .map_err(database_failure)?;
        if let Some(own) = own {
            return Err(BookingError::CustomerOverlap(Box::new(own)));
        }
    }};
}
use super::{Dialect, Store, StoreResult, reading};
use crate::booking::Appointment;
use crate::domain::{Cents, ContactId, LedgerKey, TenantId};
use crate::ledger::Fence;

/// Why a booking write did not happen: a rule the database enforces (an overlap, a fence), or
/// the storage itself.
#[derive(Debug, thiserror::Error)]
pub enum BookingError {
    #[error("that time was just taken")]
    SlotTaken,
    /// The customer already has this active appointment at an overlapping time.
    #[error("the customer already has appointment {} at that time", .0.id)]
    CustomerOverlap(Box<Appointment>),
    /// The appointment already started: it can no longer be moved or cancelled.
    #[error("appointment {} already started", .0.id)]
    AlreadyStarted(Box<Appointment>),
    /// The ledger row this effect belongs to was taken over: nothing was written.
    #[error("the ledger row was taken over by another attempt")]
    Fenced,
    #[error("not found: {0}")]
    NotFound(String),
    #[error(transparent)]
    Store(#[from] super::StoreError),
}

/// A new appointment.
#[derive(Debug, Clone)]
pub struct NewAppointment<'a> {
    pub tenant: TenantId,
    pub contact: ContactId,
    pub service_id: i64,
    pub professional_id: i64,
    pub starts_at: DateTime<Utc>,
    pub ends_at: DateTime<Utc>,
    pub price: Cents,
    /// The ledger key of the call that books it: a re-run finds the same row.
    pub key: &'a LedgerKey,
    /// Books even when the customer has another appointment at that time (a merchant's
    /// deliberate choice); a customer's own request never does.
    pub allow_customer_overlap: bool,
    /// Books it `held` until a deposit is paid; none books it `confirmed`.
    pub hold: Option<Hold>,
}

/// A booking held for its deposit.
#[derive(Debug, Clone, Copy)]
pub struct Hold {
    pub deposit: Cents,
    pub expires_at: DateTime<Utc>,
}

/// The ledger row an appointment write settles in its own transaction, and the result it
/// stores there.
pub struct SettleWith<'a> {
    pub fence: Fence<'a>,
    pub render: &'a (dyn Fn(&Appointment) -> Value + Send + Sync),
}

/// A move of an appointment to a new block (with `professional_id`, the same one or
/// another), keyed from then on by `key` (the create key of the new slot).
#[derive(Debug, Clone)]
pub struct Move<'a> {
    pub tenant: TenantId,
    pub contact: ContactId,
    pub id: i64,
    pub professional_id: i64,
    pub starts_at: DateTime<Utc>,
    pub ends_at: DateTime<Utc>,
    pub key: &'a LedgerKey,
}

#[allow(async_fn_in_trait)]
pub trait BookingStore {
    /// Active appointments of the tenant's professionals overlapping `[from, to)`.
    async fn busy_blocks(
        &self,
        tenant: TenantId,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> StoreResult<Vec<(i64, DateTime<Utc>, DateTime<Utc>)>>;
    /// Books, or returns the appointment this key already booked.
    async fn insert_appointment(
        &self,
        new: &NewAppointment<'_>,
        settle: Option<&SettleWith<'_>>,
        now: DateTime<Utc>,
    ) -> Result<Appointment, BookingError>;
    async fn appointment(&self, tenant: TenantId, id: i64) -> StoreResult<Option<Appointment>>;
    /// The appointment a ledger key describes, if any.
    async fn appointment_by_key(&self, tenant: TenantId, key: &LedgerKey) -> StoreResult<Option<Appointment>>;
    /// Cancels the customer's active appointment that has not started, releasing every ledger
    /// row that described it and cancelling its unpaid deposit charge; `NotFound` if the
    /// customer has no such appointment.
    async fn cancel_appointment(
        &self,
        tenant: TenantId,
        contact: ContactId,
        id: i64,
        settle: Option<&SettleWith<'_>>,
        now: DateTime<Utc>,
    ) -> Result<Appointment, BookingError>;
    /// Moves the customer's active appointment that has not started, releasing every ledger
    /// row that described it; `NotFound` if there is no such appointment.
    async fn move_appointment(
        &self,
        to: &Move<'_>,
        settle: Option<&SettleWith<'_>>,
        now: DateTime<Utc>,
    ) -> Result<Appointment, BookingError>;
    /// The customer's active appointments starting at or after `from`.
    async fn upcoming_appointments(
        &self,
        tenant: TenantId,
        contact: ContactId,
        from: DateTime<Utc>,
    ) -> StoreResult<Vec<Appointment>>;
    async fn count_active_appointments(&self, tenant: TenantId) -> StoreResult<i64>;
}

/// The columns of [`Appointment`], for `SELECT` and `RETURNING`.
macro_rules! appointment_columns {
    () => {
        "id, contact_id, service_id, professional_id, starts_at, ends_at, status, price_cents, deposit_cents, hold_expires_at"
    };
}
pub(crate) use appointment_columns;

impl BookingStore for Store {
    async fn busy_blocks(
        &self,
        tenant: TenantId,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> StoreResult<Vec<(i64, DateTime<Utc>, DateTime<Utc>)>> {
        Ok(reading!(self, pool => {
            sqlx::query_as(
                "SELECT professional_id, starts_at, ends_at FROM appointments
                 WHERE tenant_id = $1 AND status IN ('held', 'confirmed') AND starts_at < $3 AND ends_at > $2",
            )
            .bind(tenant.0)
            .bind(from)
            .bind(to)
            .fetch_all(pool)
            .await
        })?)
    }

    async fn appointment(&self, tenant: TenantId, id: i64) -> StoreResult<Option<Appointment>> {
        Ok(reading!(self, pool => {
            sqlx::query_as(concat!("SELECT ", appointment_columns!(), " FROM appointments WHERE tenant_id = $1 AND id = $2"))
                .bind(tenant.0)
                .bind(id)
                .fetch_optional(pool)
                .await
        })?)
    }

    async fn appointment_by_key(&self, tenant: TenantId, key: &LedgerKey) -> StoreResult<Option<Appointment>> {
        Ok(reading!(self, pool => {
            sqlx::query_as(concat!(
                "SELECT ", appointment_columns!(), " FROM appointments WHERE tenant_id = $1 AND idempotency_key = $2"
            ))
            .bind(tenant.0)
            .bind(key.as_str())
            .fetch_optional(pool)
            .await
        })?)
    }

    async fn insert_appointment(
        &self,
        new: &NewAppointment<'_>,
        settle: Option<&SettleWith<'_>>,
        now: DateTime<Utc>,
    ) -> Result<Appointment, BookingError> {
        fenced_write!(self, new.tenant, settle, now, |tx, pool, _held| {
            let locks = slot_locks(new.tenant, new.contact, new.professional_id, new.starts_at, new.ends_at);
            pool.queue_behind(&mut tx, &locks).await.map_err(database_failure)?;
            if !new.allow_customer_overlap {
                // No appointment has id 0: nothing of the customer's is left out but this key's.
                refuse_customer_overlap!(
                    tx,
                    new.tenant,
                    new.contact,
                    new.starts_at,
                    new.ends_at,
                    new.key.as_str(),
                    0_i64
                );
            }
            let inserted: Option<Appointment> = sqlx::query_as(concat!(
                "INSERT INTO appointments (tenant_id, contact_id, service_id, professional_id, starts_at, ends_at, status,
                                           price_cents, idempotency_key, created_at, updated_at, deposit_cents,
                                           hold_expires_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $10, $7, $8, $9, $9, $11, $12)
                 ON CONFLICT (tenant_id, idempotency_key) DO NOTHING
                 RETURNING ", appointment_columns!()
            ))
            .bind(new.tenant.0)
            .bind(new.contact.0)
            .bind(new.service_id)
            .bind(new.professional_id)
            .bind(new.starts_at)
            .bind(new.ends_at)
            .bind(new.price.0)
            .bind(new.key.as_str())
            .bind(now)
            .bind(if new.hold.is_some() { "held" } else { "confirmed" })
            .bind(new.hold.map_or(0, |h| h.deposit.0))
            .bind(new.hold.map(|h| h.expires_at))
            .fetch_optional(&mut *tx)
            .await
            .map_err(overlap_or)?;
            match inserted {
                Some(a) => a,
                None => sqlx::query_as(concat!(
                    "SELECT ",
                    appointment_columns!(),
                    " FROM appointments WHERE tenant_id = $1 AND idempotency_key = $2"
                ))
                .bind(new.tenant.0)
                .bind(new.key.as_str())
                .fetch_one(&mut *tx)
                .await
                .map_err(database_failure)?,
            }
        })
    }

    async fn cancel_appointment(
        &self,
        tenant: TenantId,
        contact: ContactId,
        id: i64,
        settle: Option<&SettleWith<'_>>,
        now: DateTime<Utc>,
    ) -> Result<Appointment, BookingError> {
        fenced_write!(self, tenant, settle, now, |tx, pool, held| {
            release_active!(tx, pool, tenant, contact, id, held, now);
            // A deposit still unpaid is no longer asked for.
            sqlx::query(
                "UPDATE charges SET status = 'cancelled', updated_at = $1
                 WHERE tenant_id = $2 AND appointment_id = $3 AND status = 'pending'",
            )
            .bind(now)
            .bind(tenant.0)
            .bind(id)
            .execute(&mut *tx)
            .await
            .map_err(database_failure)?;
            sqlx::query_as(concat!(
                "UPDATE appointments SET status = 'cancelled', idempotency_key = NULL, updated_at = $1
                 WHERE tenant_id = $2 AND id = $3 RETURNING ",
                appointment_columns!()
            ))
            .bind(now)
            .bind(tenant.0)
            .bind(id)
            .fetch_one(&mut *tx)
            .await
            .map_err(database_failure)?
        })
    }

    async fn move_appointment(
        &self,
        to: &Move<'_>,
        settle: Option<&SettleWith<'_>>,
        now: DateTime<Utc>,
    ) -> Result<Appointment, BookingError> {
        fenced_write!(self, to.tenant, settle, now, |tx, pool, held| {
            let locks = slot_locks(to.tenant, to.contact, to.professional_id, to.starts_at, to.ends_at);
            pool.queue_behind(&mut tx, &locks).await.map_err(database_failure)?;
            // From now on it is keyed by its new slot, so asking to book that slot finds it.
            release_active!(tx, pool, to.tenant, to.contact, to.id, held, now);
            // Not onto another of the customer's appointments, whoever moves it (the model, the
            // console): the customer's lock above makes this read hold.
            // Its own booking already at the new slot (same key) is an overlap too: no key is left out.
            refuse_customer_overlap!(tx, to.tenant, to.contact, to.starts_at, to.ends_at, "", to.id);
            sqlx::query_as(concat!(
                "UPDATE appointments SET starts_at = $1, ends_at = $2, idempotency_key = $3, updated_at = $4,
                     professional_id = $7
                 WHERE tenant_id = $5 AND id = $6 RETURNING ",
                appointment_columns!()
            ))
            .bind(to.starts_at)
            .bind(to.ends_at)
            .bind(to.key.as_str())
            .bind(now)
            .bind(to.tenant.0)
            .bind(to.id)
            .bind(to.professional_id)
            .fetch_one(&mut *tx)
            .await
            .map_err(overlap_or)?
        })
    }

    async fn upcoming_appointments(
        &self,
        tenant: TenantId,
        contact: ContactId,
        from: DateTime<Utc>,
    ) -> StoreResult<Vec<Appointment>> {
        Ok(reading!(self, pool => {
            sqlx::query_as(concat!(
                "SELECT ", appointment_columns!(), " FROM appointments
                 WHERE tenant_id = $1 AND contact_id = $2 AND status IN ('held', 'confirmed') AND starts_at >= $3
                 ORDER BY starts_at"
            ))
            .bind(tenant.0)
            .bind(contact.0)
            .bind(from)
            .fetch_all(pool)
            .await
        })?)
    }

    async fn count_active_appointments(&self, tenant: TenantId) -> StoreResult<i64> {
        Ok(reading!(self, pool => {
            sqlx::query_scalar("SELECT COUNT(*) FROM appointments WHERE tenant_id = $1 AND status IN ('held', 'confirmed')")
                .bind(tenant.0)
                .fetch_one(pool)
                .await
        })?)
    }
}
