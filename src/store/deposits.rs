//! Deposits' statements: the holds waiting for their charge, a hold running out, and a
//! deposit's payment, each one transaction. See `crate::money::deposits` for the invariants they
//! uphold.

use chrono::{DateTime, Utc};

use super::appointments::appointment_columns;
use super::charges::{charge_columns, pay_charge};
use super::tx::{insert_outbound, is_overlap, supersede_subject};
use super::{Dialect, NewOutbound, Store, StoreResult, changed_one, reading, writing};
use crate::booking::Appointment;
use crate::domain::{ContactId, TenantId};
use crate::ledger::Held;
use crate::money::charges::Charge;

/// What a deposit's payment came to.
#[derive(Debug, Clone)]
pub enum DepositPayment {
    /// The charge is paid and its appointment confirmed.
    Confirmed(Box<Charge>),
    /// The appointment could not be confirmed (its slot was taken after the hold lapsed, it was
    /// cancelled or it started): the charge is `refund_due`.
    RefundDue(Box<Charge>),
}

#[allow(async_fn_in_trait)]
pub trait DepositStore {
    /// Held appointments waiting for a deposit whose hold still runs at `now` and that have no
    /// deposit charge yet, with their tenant, oldest first.
    async fn holds_awaiting_charge(&self, now: DateTime<Utc>, limit: i64) -> StoreResult<Vec<(TenantId, Appointment)>>;
    /// Whether contact `contact` has a hold still running at `now` whose deposit has no charge yet.
    async fn awaits_deposit_charge(
        &self,
        tenant: TenantId,
        contact: ContactId,
        now: DateTime<Utc>,
    ) -> StoreResult<bool>;
    /// Held appointments whose hold ran out by `now`, with their tenant.
    async fn lapsed_holds(&self, now: DateTime<Utc>, limit: i64) -> StoreResult<Vec<(TenantId, Appointment)>>;
    /// held → expired for appointment `id` if its hold ran out by `now`: its pending deposit
    /// charge expires, the ledger rows and pending proposals about it are superseded and
    /// `notice` is queued, in one transaction. `None` when it was no longer held (paid,
    /// cancelled, or expired by another sweep): nothing is written then.
    async fn expire_hold(
        &self,
        tenant: TenantId,
        id: i64,
        notice: Option<&NewOutbound>,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<Appointment>>;
    /// Records the payment of deposit charge `id` (pending, expired or cancelled) in one
    /// transaction: its appointment is confirmed if it still can be (held, or expired with its
    /// slot still free; not started) and `confirmed` queued, otherwise the charge becomes
    /// `refund_due` and `refund` is queued. `None` when the charge is no deposit or was not
    /// payable (already paid, say): nothing is written then.
    async fn pay_deposit(
        &self,
        tenant: TenantId,
        id: i64,
        end_to_end_id: Option<&str>,
        confirmed: &[NewOutbound],
        refund: &[NewOutbound],
        now: DateTime<Utc>,
    ) -> StoreResult<Option<DepositPayment>>;
}

#[derive(sqlx::FromRow)]
struct Row {
    tenant_id: i64,
    #[sqlx(flatten)]
    appointment: Appointment,
}

fn with_tenant(rows: Vec<Row>) -> Vec<(TenantId, Appointment)> {
    rows.into_iter().map(|r| (TenantId(r.tenant_id), r.appointment)).collect()
}

impl DepositStore for Store {
    async fn holds_awaiting_charge(&self, now: DateTime<Utc>, limit: i64) -> StoreResult<Vec<(TenantId, Appointment)>> {
        let rows: Vec<Row> = reading!(self, pool => {
            sqlx::query_as(concat!(
                "SELECT tenant_id, ", appointment_columns!(), " FROM appointments
                 WHERE status = 'held' AND deposit_cents > 0 AND hold_expires_at > $1
                   AND NOT EXISTS (SELECT 1 FROM charges c WHERE c.tenant_id = appointments.tenant_id
                                   AND c.appointment_id = appointments.id)
                 ORDER BY id LIMIT $2"
            ))
            .bind(now)
            .bind(limit)
            .fetch_all(pool)
            .await
        })?;
        Ok(with_tenant(rows))
    }

    async fn awaits_deposit_charge(
        &self,
        tenant: TenantId,
        contact: ContactId,
        now: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let found: Option<i64> = reading!(self, pool => {
            sqlx::query_scalar(
                "SELECT id FROM appointments
                 WHERE tenant_id = $1 AND contact_id = $2 AND status = 'held' AND deposit_cents > 0
                   AND hold_expires_at > $3
                   AND NOT EXISTS (SELECT 1 FROM charges c WHERE c.tenant_id = appointments.tenant_id
                                   AND c.appointment_id = appointments.id)
                 LIMIT 1",
            )
            .bind(tenant.0)
            .bind(contact.0)
            .bind(now)
            .fetch_optional(pool)
            .await
        })?;
        Ok(found.is_some())
    }

    async fn lapsed_holds(&self, now: DateTime<Utc>, limit: i64) -> StoreResult<Vec<(TenantId, Appointment)>> {
        let rows: Vec<Row> = reading!(self, pool => {
            sqlx::query_as(concat!(
                "SELECT tenant_id, ", appointment_columns!(), " FROM appointments
                 WHERE status = 'held' AND hold_expires_at <= $1 ORDER BY hold_expires_at, id LIMIT $2"
            ))
            .bind(now)
            .bind(limit)
            .fetch_all(pool)
            .await
        })?;
        Ok(with_tenant(rows))
    }

    async fn expire_hold(
        &self,
        tenant: TenantId,
        id: i64,
        notice: Option<&NewOutbound>,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<Appointment>> {
        writing!(self, pool => {
            let mut tx = pool.begin_write().await?;
            // The key goes too: booking the same slot again is a new booking, not this one.
            let expired: Option<Appointment> = sqlx::query_as(concat!(
                "UPDATE appointments SET status = 'expired', idempotency_key = NULL, updated_at = $1
                 WHERE tenant_id = $2 AND id = $3 AND status = 'held' AND hold_expires_at <= $1
                 RETURNING ", appointment_columns!()
            ))
            .bind(now)
            .bind(tenant.0)
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?;
            let Some(expired) = expired else {
                tx.rollback().await?;
                return Ok(None);
            };
            sqlx::query(
                "UPDATE charges SET status = 'expired', updated_at = $1
                 WHERE tenant_id = $2 AND appointment_id = $3 AND status = 'pending'",
            )
            .bind(now)
            .bind(tenant.0)
            .bind(id)
            .execute(&mut *tx)
            .await?;
            let subject = format!("appointment:{id}");
            supersede_subject!(tx, tenant, &subject, None::<&str>, None::<Held>, now)?;
            // A cancellation offered for it no longer describes anything.
            let stale: Vec<String> = sqlx::query_scalar(
                "UPDATE pending_actions SET status = 'superseded', updated_at = $1, decided_at = $1
                 WHERE tenant_id = $2 AND subject = $3 AND status = 'pending'
                 RETURNING id",
            )
            .bind(now)
            .bind(tenant.0)
            .bind(&subject)
            .fetch_all(&mut *tx)
            .await?;
            for action in stale {
                supersede_subject!(tx, tenant, &format!("action:{action}"), None::<&str>, None::<Held>, now)?;
            }
            if let Some(notice) = notice {
                let _: Option<i64> = insert_outbound!(tx, notice, now)?;
            }
            tx.commit().await?;
            Ok(Some(expired))
        })
    }

    async fn pay_deposit(
        &self,
        tenant: TenantId,
        id: i64,
        end_to_end_id: Option<&str>,
        confirmed: &[NewOutbound],
        refund: &[NewOutbound],
        now: DateTime<Utc>,
    ) -> StoreResult<Option<DepositPayment>> {
        writing!(self, pool => {
            let mut tx = pool.begin_write().await?;
            // The appointment first, then its charge: the order the hold's expiry takes, so a
            // payment racing the expiry waits instead of deadlocking on PostgreSQL.
            sqlx::query(pool.pick(
                // SQLite's single writer already serializes the two.
                "SELECT $1, $2",
                "SELECT a.id FROM appointments a JOIN charges c ON c.appointment_id = a.id
                 WHERE c.tenant_id = $1 AND c.id = $2 FOR UPDATE OF a",
            ))
            .bind(tenant.0)
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?;
            // A deposit is payable late too: its slot may still be free.
            let paid = pay_charge!(
                tx,
                tenant,
                id,
                end_to_end_id,
                now,
                "appointment_id IS NOT NULL AND status IN ('pending', 'expired', 'cancelled')"
            )?;
            let Some(paid) = paid else {
                tx.rollback().await?;
                return Ok(None);
            };
            // A savepoint: on PostgreSQL a refused statement spoils the whole transaction. Taken
            // in SQL, not with sqlx's nested `begin`: a unit of work's transaction is opened
            // with a plain `BEGIN` that sqlx does not count (`store::unit`).
            sqlx::raw_sql("SAVEPOINT reactivate").execute(&mut *tx).await?;
            let reactivated = sqlx::query(
                "UPDATE appointments SET status = 'confirmed', hold_expires_at = NULL, updated_at = $1
                 WHERE tenant_id = $2 AND id = $3 AND status IN ('held', 'expired') AND starts_at > $1
                   AND NOT EXISTS (
                       SELECT 1 FROM appointments own
                       WHERE own.tenant_id = appointments.tenant_id AND own.contact_id = appointments.contact_id
                         AND own.id <> appointments.id AND own.status IN ('held', 'confirmed')
                         AND own.starts_at < appointments.ends_at AND own.ends_at > appointments.starts_at)",
            )
            .bind(now)
            .bind(tenant.0)
            .bind(paid.appointment_id)
            .execute(&mut *tx)
            .await;
            let confirms = match reactivated {
                Ok(done) => changed_one(done),
                Err(e) if is_overlap(&e) => false,
                Err(e) => return Err(e.into()),
            };
            let outcome = if confirms {
                sqlx::raw_sql("RELEASE SAVEPOINT reactivate").execute(&mut *tx).await?;
                for message in confirmed {
                    let _: Option<i64> = insert_outbound!(tx, message, now)?;
                }
                DepositPayment::Confirmed(Box::new(paid))
            } else {
                sqlx::raw_sql("ROLLBACK TO SAVEPOINT reactivate").execute(&mut *tx).await?;
                let due: Charge = sqlx::query_as(concat!(
                    "UPDATE charges SET status = 'refund_due', updated_at = $1 WHERE tenant_id = $2 AND id = $3
                     RETURNING ",
                    charge_columns!()
                ))
                .bind(now)
                .bind(tenant.0)
                .bind(id)
                .fetch_one(&mut *tx)
                .await?;
                for message in refund {
                    let _: Option<i64> = insert_outbound!(tx, message, now)?;
                }
                DepositPayment::RefundDue(Box::new(due))
            };
            tx.commit().await?;
            Ok(Some(outcome))
        })
    }
}
