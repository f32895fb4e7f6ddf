//! Payment notifications' statements, and the charge lookups the paid path needs. See
//! `crate::money::payments` for the invariants they uphold.

use chrono::{DateTime, Utc};

use super::charges::charge_columns;
use super::{Dialect, Store, StoreResult, reading, writing};
use crate::domain::TenantId;
use crate::money::charges::Charge;
use crate::money::payments::PaymentEvent;

/// The columns of [`PaymentEvent`].
macro_rules! event_columns {
    () => {
        "id, tenant_id, provider, event_id, ref_kind, charge_ref, status, charge_id, attempts, last_error, received_at"
    };
}

/// Moves the oldest due event's next look to `$1` (the claim's lease) and returns it.
macro_rules! claim_event_sql {
    ($lock:literal) => {
        concat!(
            "UPDATE payment_events SET next_attempt_at = $1
             WHERE status = 'received' AND next_attempt_at <= $2 AND id = (
                 SELECT id FROM payment_events WHERE status = 'received' AND next_attempt_at <= $2
                 ORDER BY next_attempt_at, id LIMIT 1 ",
            $lock,
            ") RETURNING ",
            event_columns!()
        )
    };
}

/// A notification's event to store.
pub struct NewPaymentEvent<'a> {
    pub tenant: TenantId,
    pub provider: &'a str,
    pub event_id: &'a str,
    /// `txid` or `provider_ref`.
    pub ref_kind: &'a str,
    pub charge_ref: &'a str,
}

/// The error a look records when no charge knows the notification yet: recording that charge
/// brings such a look forward (`ChargeStore::record_charge`).
pub const NO_CHARGE_YET: &str = "no such charge (yet)";

#[allow(async_fn_in_trait)]
pub trait PaymentStore {
    /// Stores the event once (per tenant, provider and event id); false for a duplicate.
    async fn record_payment_event(&self, new: &NewPaymentEvent<'_>, now: DateTime<Utc>) -> StoreResult<bool>;
    /// Takes the oldest event due at `now` for one look, leased until `until`: no other
    /// process looks at it meanwhile (each look counts one attempt), and a process that dies
    /// mid-look leaves it due again at `until`.
    async fn claim_payment_event(&self, now: DateTime<Utc>, until: DateTime<Utc>) -> StoreResult<Option<PaymentEvent>>;
    /// Ends an event as `status` (processed, unmatched, alerted), naming its charge.
    async fn finish_payment_event(
        &self,
        id: i64,
        status: &str,
        charge: Option<i64>,
        error: Option<&str>,
        now: DateTime<Utc>,
    ) -> StoreResult<()>;
    /// Leaves an event for later, counting the attempt.
    async fn retry_payment_event(&self, id: i64, error: &str, at: DateTime<Utc>) -> StoreResult<()>;
    /// The tenant's charge a notification names by txid or by the provider's id.
    async fn charge_by_ref(&self, tenant: TenantId, ref_kind: &str, charge_ref: &str) -> StoreResult<Option<Charge>>;
    /// Pending charges at real providers created before `created_before` and not asked about
    /// since `checked_before`, with their tenant, for the poller; marks them asked at `now`.
    async fn charges_to_check(
        &self,
        created_before: DateTime<Utc>,
        checked_before: DateTime<Utc>,
        limit: i64,
        now: DateTime<Utc>,
    ) -> StoreResult<Vec<(TenantId, Charge)>>;
}

impl PaymentStore for Store {
    async fn record_payment_event(&self, new: &NewPaymentEvent<'_>, now: DateTime<Utc>) -> StoreResult<bool> {
        let id: Option<i64> = writing!(self, pool => {
            sqlx::query_scalar(
                "INSERT INTO payment_events
                     (tenant_id, provider, event_id, ref_kind, charge_ref, status, next_attempt_at, received_at)
                 VALUES ($1, $2, $3, $4, $5, 'received', $6, $6)
                 ON CONFLICT (tenant_id, provider, event_id) DO NOTHING
                 RETURNING id",
            )
            .bind(new.tenant.0)
            .bind(new.provider)
            .bind(new.event_id)
            .bind(new.ref_kind)
            .bind(new.charge_ref)
            .bind(now)
            .fetch_optional(pool)
            .await
        })?;
        Ok(id.is_some())
    }

    async fn claim_payment_event(&self, now: DateTime<Utc>, until: DateTime<Utc>) -> StoreResult<Option<PaymentEvent>> {
        // An idle pass reads and writes nothing.
        if !self.is_due(super::due::Queue::PaymentEvents, now).await? {
            return Ok(None);
        }
        Ok(writing!(self, pool => {
            // One statement, atomic on both engines; on PostgreSQL the outer `next_attempt_at`
            // test is checked again against a row another process claimed meanwhile.
            let sql = pool.pick(claim_event_sql!(""), claim_event_sql!("FOR UPDATE SKIP LOCKED"));
            sqlx::query_as(sql).bind(until).bind(now).fetch_optional(pool).await
        })?)
    }

    async fn finish_payment_event(
        &self,
        id: i64,
        status: &str,
        charge: Option<i64>,
        error: Option<&str>,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        writing!(self, pool => {
            sqlx::query(
                "UPDATE payment_events SET status = $1, charge_id = $2, last_error = $3, processed_at = $4,
                     attempts = attempts + 1
                 WHERE id = $5 AND status = 'received'",
            )
            .bind(status)
            .bind(charge)
            .bind(error)
            .bind(now)
            .bind(id)
            .execute(pool)
            .await
            .map(|_| ())
        })?;
        Ok(())
    }

    async fn retry_payment_event(&self, id: i64, error: &str, at: DateTime<Utc>) -> StoreResult<()> {
        writing!(self, pool => {
            sqlx::query(
                "UPDATE payment_events SET attempts = attempts + 1, last_error = $1, next_attempt_at = $2
                 WHERE id = $3 AND status = 'received'",
            )
            .bind(error)
            .bind(at)
            .bind(id)
            .execute(pool)
            .await
            .map(|_| ())
        })?;
        Ok(())
    }

    async fn charge_by_ref(&self, tenant: TenantId, ref_kind: &str, charge_ref: &str) -> StoreResult<Option<Charge>> {
        let sql = match ref_kind {
            "txid" => concat!("SELECT ", charge_columns!(), " FROM charges WHERE tenant_id = $1 AND txid = $2"),
            _ => concat!("SELECT ", charge_columns!(), " FROM charges WHERE tenant_id = $1 AND provider_ref = $2"),
        };
        Ok(reading!(self, pool => {
            sqlx::query_as(sql).bind(tenant.0).bind(charge_ref).fetch_optional(pool).await
        })?)
    }

    async fn charges_to_check(
        &self,
        created_before: DateTime<Utc>,
        checked_before: DateTime<Utc>,
        limit: i64,
        now: DateTime<Utc>,
    ) -> StoreResult<Vec<(TenantId, Charge)>> {
        #[derive(sqlx::FromRow)]
        struct Row {
            tenant_id: i64,
            #[sqlx(flatten)]
            charge: Charge,
        }
        let rows: Vec<Row> = writing!(self, pool => {
            sqlx::query_as(concat!(
                "UPDATE charges SET checked_at = $4
                 WHERE id IN (SELECT id FROM charges
                              WHERE status = 'pending' AND gateway <> 'sandbox' AND created_at < $1
                                AND (checked_at IS NULL OR checked_at < $2)
                              ORDER BY created_at LIMIT $3)
                 RETURNING tenant_id, ", charge_columns!()
            ))
            .bind(created_before)
            .bind(checked_before)
            .bind(limit)
            .bind(now)
            .fetch_all(pool)
            .await
        })?;
        Ok(rows.into_iter().map(|r| (TenantId(r.tenant_id), r.charge)).collect())
    }
}
