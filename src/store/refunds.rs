//! Refunds' statements. See `crate::money::refunds` for the invariants they uphold.

use chrono::{DateTime, Utc};

use super::charges::charge_columns;
use super::tx::insert_outbound;
use super::{Dialect, NewOutbound, Store, StoreResult, changed_one, reading, writing};
use crate::domain::{ActionId, Cents, ConversationId, LedgerKey, TenantId};
use crate::money::charges::Charge;
use crate::money::refunds::Refund;

macro_rules! refund_columns {
    () => {
        "id, charge_id, action_id, offer_id, idempotency_key, refund_id, gateway, provider_ref, amount_cents, status, \
         reason, merchant_conversation_id, created_at, settled_at"
    };
}

/// Inside a transaction: the refund recorded for `$new`'s offer, if it has one.
macro_rules! offer_refund {
    ($tx:expr, $new:expr) => {
        async {
            match $new.offer {
                None => Ok(None),
                Some(offer) => {
                    sqlx::query_as::<_, Refund>(concat!(
                        "SELECT ",
                        refund_columns!(),
                        " FROM refunds WHERE tenant_id = $1 AND offer_id = $2"
                    ))
                    .bind($new.tenant.0)
                    .bind(offer)
                    .fetch_optional(&mut *$tx)
                    .await
                }
            }
        }
        .await
    };
}

/// A refund to reserve the money of, before it is requested.
pub struct NewRefund<'a> {
    pub tenant: TenantId,
    pub charge: i64,
    pub action: ActionId,
    /// The offer it answers, when one offer went to several staff members.
    pub offer: Option<&'a str>,
    pub key: &'a LedgerKey,
    pub refund_id: &'a str,
    pub gateway: &'a str,
    pub amount: Cents,
    pub merchant_conversation: Option<ConversationId>,
}

/// What reserving a refund came to.
#[derive(Debug, Clone)]
pub enum Reserved {
    /// Reserved now (or by an earlier attempt of the same key, which is returned).
    Refund(Refund),
    /// Another staff member confirmed the same offer first: that refund, and nothing reserved.
    Sibling(Refund),
    /// The charge cannot give back that much: what it still can (zero when it is not paid).
    Exceeds {
        refundable: Cents,
        status: String,
    },
    NoCharge,
}

#[allow(async_fn_in_trait)]
pub trait RefundStore {
    /// Reserves `new.amount` of its charge and records the refund as processing, in one
    /// transaction; the reservation is one conditional update that never lets the charge's
    /// reserved sum pass its amount, so two refunds racing for the same money have one winner.
    /// A refund already recorded under `new.key` is returned as it is; one recorded for the same
    /// offer (another staff member's action) as a sibling.
    async fn reserve_refund(&self, new: &NewRefund<'_>, now: DateTime<Utc>) -> StoreResult<Reserved>;
    /// Records the provider's id of a refund still processing.
    async fn note_refund_progress(
        &self,
        tenant: TenantId,
        id: i64,
        provider_ref: Option<&str>,
        now: DateTime<Utc>,
    ) -> StoreResult<()>;
    /// processing → done: the charge's refunded sum and status follow and `notices` (built from
    /// the charge as it becomes) are queued, in one transaction. `None` when it was no longer
    /// processing (settled by another path): nothing is written then.
    async fn settle_refund(
        &self,
        tenant: TenantId,
        id: i64,
        provider_ref: Option<&str>,
        notices: &(dyn Fn(&Charge) -> Vec<NewOutbound> + Send + Sync),
        now: DateTime<Utc>,
    ) -> StoreResult<Option<(Refund, Charge)>>;
    /// processing → failed: its reservation is released and `notices` queued, in one
    /// transaction. `None` when it was no longer processing.
    async fn fail_refund(
        &self,
        tenant: TenantId,
        id: i64,
        reason: &str,
        notices: &[NewOutbound],
        now: DateTime<Utc>,
    ) -> StoreResult<Option<Refund>>;
    async fn refund_by_key(&self, tenant: TenantId, key: &LedgerKey) -> StoreResult<Option<Refund>>;
    /// The charge's refunds, oldest first.
    async fn refunds_of_charge(&self, tenant: TenantId, charge: i64) -> StoreResult<Vec<Refund>>;
    /// Refunds still processing, least recently looked at first, with their tenant; each is
    /// marked looked at.
    async fn refunds_to_poll(&self, now: DateTime<Utc>, limit: i64) -> StoreResult<Vec<(TenantId, Refund)>>;
    /// Refunds still processing, recorded before `before`, whose ledger call is unsettled
    /// (running, outcome unknown, or failed for now), with their tenant, oldest first: the calls
    /// a dead or gave-up job may have abandoned. One settled is left to the poll.
    async fn stale_refunds(&self, before: DateTime<Utc>, limit: i64) -> StoreResult<Vec<(TenantId, Refund)>>;
    /// A payment for a charge closed here (expired, cancelled): the charge becomes `refund_due`
    /// with its payment recorded. False when it was not closed.
    async fn mark_refund_due(
        &self,
        tenant: TenantId,
        id: i64,
        end_to_end_id: Option<&str>,
        now: DateTime<Utc>,
    ) -> StoreResult<bool>;
    /// Charges due for a refund whose staff were not offered it yet, with their tenant.
    async fn refunds_to_offer(&self, limit: i64) -> StoreResult<Vec<(TenantId, Charge)>>;
}

#[derive(sqlx::FromRow)]
struct Row {
    tenant_id: i64,
    #[sqlx(flatten)]
    refund: Refund,
}

#[derive(sqlx::FromRow)]
struct ChargeRow {
    tenant_id: i64,
    #[sqlx(flatten)]
    charge: Charge,
}

impl RefundStore for Store {
    async fn reserve_refund(&self, new: &NewRefund<'_>, now: DateTime<Utc>) -> StoreResult<Reserved> {
        writing!(self, pool => {
            let mut tx = pool.begin_write().await?;
            let existing: Option<Refund> = sqlx::query_as(concat!(
                "SELECT ", refund_columns!(), " FROM refunds WHERE tenant_id = $1 AND idempotency_key = $2"
            ))
            .bind(new.tenant.0)
            .bind(new.key.as_str())
            .fetch_optional(&mut *tx)
            .await?;
            if let Some(refund) = existing {
                tx.rollback().await?;
                return Ok(Reserved::Refund(refund));
            }
            if let Some(sibling) = offer_refund!(tx, new)? {
                tx.rollback().await?;
                return Ok(Reserved::Sibling(sibling));
            }
            let reserved: Option<i64> = sqlx::query_scalar(
                "UPDATE charges SET refund_reserved_cents = refund_reserved_cents + $1, updated_at = $2
                 WHERE tenant_id = $3 AND id = $4 AND status IN ('paid', 'refund_due', 'partially_refunded')
                   AND refund_reserved_cents + $1 <= amount_cents
                 RETURNING id",
            )
            .bind(new.amount.0)
            .bind(now)
            .bind(new.tenant.0)
            .bind(new.charge)
            .fetch_optional(&mut *tx)
            .await?;
            if reserved.is_none() {
                let charge: Option<Charge> = sqlx::query_as(concat!(
                    "SELECT ", charge_columns!(), " FROM charges WHERE tenant_id = $1 AND id = $2"
                ))
                .bind(new.tenant.0)
                .bind(new.charge)
                .fetch_optional(&mut *tx)
                .await?;
                tx.rollback().await?;
                return Ok(match charge {
                    Some(c) => Reserved::Exceeds { refundable: c.refundable(), status: c.status },
                    None => Reserved::NoCharge,
                });
            }
            // A sibling that committed since the lookup above (PostgreSQL runs both at once)
            // wins the offer's unique id: this one's reservation is rolled back.
            let refund: Option<Refund> = sqlx::query_as(concat!(
                "INSERT INTO refunds
                     (tenant_id, charge_id, action_id, offer_id, idempotency_key, refund_id, gateway, amount_cents,
                      status, merchant_conversation_id, created_at, updated_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'processing', $9, $10, $10)
                 ON CONFLICT DO NOTHING
                 RETURNING ",
                refund_columns!()
            ))
            .bind(new.tenant.0)
            .bind(new.charge)
            .bind(new.action.to_string())
            .bind(new.offer)
            .bind(new.key.as_str())
            .bind(new.refund_id)
            .bind(new.gateway)
            .bind(new.amount.0)
            .bind(new.merchant_conversation.map(|c| c.0))
            .bind(now)
            .fetch_optional(&mut *tx)
            .await?;
            let Some(refund) = refund else {
                tx.rollback().await?;
                let mut again = pool.begin_write().await?;
                let sibling = offer_refund!(again, new)?;
                again.rollback().await?;
                return match sibling {
                    Some(sibling) => Ok(Reserved::Sibling(sibling)),
                    None => Err(super::StoreError::Conflict("a refund under this key was recorded meanwhile".into())),
                };
            };
            tx.commit().await?;
            Ok(Reserved::Refund(refund))
        })
    }

    async fn note_refund_progress(
        &self,
        tenant: TenantId,
        id: i64,
        provider_ref: Option<&str>,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        writing!(self, pool => {
            sqlx::query(
                "UPDATE refunds SET provider_ref = COALESCE($1, provider_ref), updated_at = $2
                 WHERE tenant_id = $3 AND id = $4 AND status = 'processing'",
            )
            .bind(provider_ref)
            .bind(now)
            .bind(tenant.0)
            .bind(id)
            .execute(pool)
            .await
            .map(|_| ())
        })?;
        Ok(())
    }

    async fn settle_refund(
        &self,
        tenant: TenantId,
        id: i64,
        provider_ref: Option<&str>,
        notices: &(dyn Fn(&Charge) -> Vec<NewOutbound> + Send + Sync),
        now: DateTime<Utc>,
    ) -> StoreResult<Option<(Refund, Charge)>> {
        writing!(self, pool => {
            let mut tx = pool.begin_write().await?;
            let refund: Option<Refund> = sqlx::query_as(concat!(
                "UPDATE refunds SET status = 'done', provider_ref = COALESCE($1, provider_ref), settled_at = $2,
                     updated_at = $2
                 WHERE tenant_id = $3 AND id = $4 AND status = 'processing'
                 RETURNING ",
                refund_columns!()
            ))
            .bind(provider_ref)
            .bind(now)
            .bind(tenant.0)
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?;
            let Some(refund) = refund else {
                tx.rollback().await?;
                return Ok(None);
            };
            // The SET expressions read the row as it was, on both dialects.
            let charge: Charge = sqlx::query_as(concat!(
                "UPDATE charges SET refunded_cents = refunded_cents + $1, updated_at = $2,
                     status = CASE WHEN refunded_cents + $1 >= amount_cents THEN 'refunded' ELSE 'partially_refunded' END
                 WHERE tenant_id = $3 AND id = $4
                 RETURNING ",
                charge_columns!()
            ))
            .bind(refund.amount_cents)
            .bind(now)
            .bind(tenant.0)
            .bind(refund.charge_id)
            .fetch_one(&mut *tx)
            .await?;
            for message in notices(&charge) {
                let _: Option<i64> = insert_outbound!(tx, message, now)?;
            }
            tx.commit().await?;
            Ok(Some((refund, charge)))
        })
    }

    async fn fail_refund(
        &self,
        tenant: TenantId,
        id: i64,
        reason: &str,
        notices: &[NewOutbound],
        now: DateTime<Utc>,
    ) -> StoreResult<Option<Refund>> {
        writing!(self, pool => {
            let mut tx = pool.begin_write().await?;
            let refund: Option<Refund> = sqlx::query_as(concat!(
                "UPDATE refunds SET status = 'failed', reason = $1, settled_at = $2, updated_at = $2
                 WHERE tenant_id = $3 AND id = $4 AND status = 'processing'
                 RETURNING ",
                refund_columns!()
            ))
            .bind(reason)
            .bind(now)
            .bind(tenant.0)
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?;
            let Some(refund) = refund else {
                tx.rollback().await?;
                return Ok(None);
            };
            sqlx::query(
                "UPDATE charges SET refund_reserved_cents = refund_reserved_cents - $1, updated_at = $2
                 WHERE tenant_id = $3 AND id = $4",
            )
            .bind(refund.amount_cents)
            .bind(now)
            .bind(tenant.0)
            .bind(refund.charge_id)
            .execute(&mut *tx)
            .await?;
            for message in notices {
                let _: Option<i64> = insert_outbound!(tx, message, now)?;
            }
            tx.commit().await?;
            Ok(Some(refund))
        })
    }

    async fn refund_by_key(&self, tenant: TenantId, key: &LedgerKey) -> StoreResult<Option<Refund>> {
        Ok(reading!(self, pool => {
            sqlx::query_as(concat!(
                "SELECT ", refund_columns!(), " FROM refunds WHERE tenant_id = $1 AND idempotency_key = $2"
            ))
            .bind(tenant.0)
            .bind(key.as_str())
            .fetch_optional(pool)
            .await
        })?)
    }

    async fn refunds_of_charge(&self, tenant: TenantId, charge: i64) -> StoreResult<Vec<Refund>> {
        Ok(reading!(self, pool => {
            sqlx::query_as(concat!(
                "SELECT ", refund_columns!(), " FROM refunds WHERE tenant_id = $1 AND charge_id = $2 ORDER BY id"
            ))
            .bind(tenant.0)
            .bind(charge)
            .fetch_all(pool)
            .await
        })?)
    }

    async fn refunds_to_poll(&self, now: DateTime<Utc>, limit: i64) -> StoreResult<Vec<(TenantId, Refund)>> {
        // Picked and marked looked at in one statement, least recently looked at first.
        let rows: Vec<Row> = writing!(self, pool => {
            sqlx::query_as(concat!(
                "UPDATE refunds SET updated_at = $1
                 WHERE id IN (SELECT id FROM refunds WHERE status = 'processing' ORDER BY updated_at, id LIMIT $2)
                 RETURNING tenant_id, ", refund_columns!()
            ))
            .bind(now)
            .bind(limit)
            .fetch_all(pool)
            .await
        })?;
        Ok(rows.into_iter().map(|r| (TenantId(r.tenant_id), r.refund)).collect())
    }

    async fn stale_refunds(&self, before: DateTime<Utc>, limit: i64) -> StoreResult<Vec<(TenantId, Refund)>> {
        let rows: Vec<Row> = reading!(self, pool => {
            sqlx::query_as(concat!(
                "SELECT tenant_id, ", refund_columns!(), " FROM refunds r
                 WHERE status = 'processing' AND created_at <= $1
                   AND EXISTS (SELECT 1 FROM agent_tool_executions e
                               WHERE e.tenant_id = r.tenant_id AND e.idempotency_key = r.idempotency_key
                                 AND e.status IN ('running', 'outcome_unknown', 'failed_transient'))
                 ORDER BY id LIMIT $2"
            ))
            .bind(before)
            .bind(limit)
            .fetch_all(pool)
            .await
        })?;
        Ok(rows.into_iter().map(|r| (TenantId(r.tenant_id), r.refund)).collect())
    }

    async fn mark_refund_due(
        &self,
        tenant: TenantId,
        id: i64,
        end_to_end_id: Option<&str>,
        now: DateTime<Utc>,
    ) -> StoreResult<bool> {
        Ok(writing!(self, pool => {
            sqlx::query(
                "UPDATE charges SET status = 'refund_due', paid_at = COALESCE(paid_at, $1), updated_at = $1,
                     end_to_end_id = COALESCE($2, end_to_end_id)
                 WHERE tenant_id = $3 AND id = $4 AND status IN ('expired', 'cancelled')",
            )
            .bind(now)
            .bind(end_to_end_id)
            .bind(tenant.0)
            .bind(id)
            .execute(pool)
            .await
            .map(changed_one)
        })?)
    }

    async fn refunds_to_offer(&self, limit: i64) -> StoreResult<Vec<(TenantId, Charge)>> {
        let rows: Vec<ChargeRow> = reading!(self, pool => {
            sqlx::query_as(concat!(
                "SELECT tenant_id, ", charge_columns!(), " FROM charges
                 WHERE status = 'refund_due' AND refund_offered_at IS NULL AND refund_reserved_cents < amount_cents
                 ORDER BY id LIMIT $1"
            ))
            .bind(limit)
            .fetch_all(pool)
            .await
        })?;
        Ok(rows.into_iter().map(|r| (TenantId(r.tenant_id), r.charge)).collect())
    }
}
