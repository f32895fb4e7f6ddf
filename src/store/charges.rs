//! Pix charges' statements. See `crate::money::charges` for the invariants they uphold.

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::tx::{hold_fence, insert_outbound, settle_in_tx};
use super::{Dialect, NewOutbound, Store, StoreResult, changed_one, reading, writing};
use crate::domain::{ActionId, Cents, ConversationId, LedgerKey, PhoneE164, TenantId};
use crate::ledger::Fence;
use crate::money::charges::Charge;

/// The columns of [`Charge`].
macro_rules! charge_columns {
    () => {
        "id, action_id, appointment_id, idempotency_key, txid, gateway, provider_ref, amount_cents, description, customer_phone, \
         customer_conversation_id, merchant_conversation_id, status, copia_e_cola, delivery, expires_at, paid_at, \
         end_to_end_id, refund_reserved_cents, refunded_cents, created_at"
    };
}
pub(crate) use charge_columns;

/// Inside a write transaction: charge `$id` → paid, if `$payable` (a condition on its row)
/// holds; yields the paid charge, or `None` when it was not payable.
macro_rules! pay_charge {
    ($tx:expr, $tenant:expr, $id:expr, $end_to_end_id:expr, $now:expr, $payable:literal) => {
        sqlx::query_as::<_, Charge>(concat!(
            "UPDATE charges SET status = 'paid', paid_at = $1, updated_at = $1, end_to_end_id = $4
             WHERE tenant_id = $2 AND id = $3 AND ",
            $payable,
            " RETURNING ",
            charge_columns!()
        ))
        .bind($now)
        .bind($tenant.0)
        .bind($id)
        .bind($end_to_end_id)
        .fetch_optional(&mut *$tx)
        .await
    };
}
pub(crate) use pay_charge;

/// A charge the gateway created, to record.
pub struct NewCharge<'a> {
    pub tenant: TenantId,
    /// The merchant's confirmed action, or none for a booking deposit.
    pub action: Option<ActionId>,
    /// The appointment a deposit holds.
    pub appointment: Option<i64>,
    pub key: &'a LedgerKey,
    pub txid: &'a str,
    pub gateway: &'a str,
    pub provider_ref: Option<&'a str>,
    pub amount: Cents,
    pub description: &'a str,
    pub customer_phone: &'a PhoneE164,
    pub customer_conversation: ConversationId,
    pub merchant_conversation: Option<ConversationId>,
    pub copia_e_cola: &'a str,
    pub delivery: &'a str,
    pub expires_at: DateTime<Utc>,
}

#[allow(async_fn_in_trait)]
pub trait ChargeStore {
    /// Records the charge (or finds the one its key already recorded), queues the messages
    /// `messages` builds for it and settles the ledger row `fence` with `render`'s result, in
    /// one transaction. `None` when the fence no longer holds: nothing was written.
    async fn record_charge(
        &self,
        new: &NewCharge<'_>,
        fence: Fence<'_>,
        messages: &(dyn Fn(&Charge) -> Vec<NewOutbound> + Send + Sync),
        render: &(dyn Fn(&Charge) -> Value + Send + Sync),
        now: DateTime<Utc>,
    ) -> StoreResult<Option<Charge>>;
    /// pending → paid with the notices `notices` builds, in one transaction; `None` when the
    /// charge was not pending (already paid, say): nothing is written then.
    async fn mark_charge_paid(
        &self,
        tenant: TenantId,
        id: i64,
        end_to_end_id: Option<&str>,
        notices: &(dyn Fn(&Charge) -> Vec<NewOutbound> + Send + Sync),
        now: DateTime<Utc>,
    ) -> StoreResult<Option<Charge>>;
    /// pending → expired for sandbox charges past their expiry; returns how many.
    async fn expire_charges(&self, now: DateTime<Utc>) -> StoreResult<u64>;
    /// pending → `status` (expired, cancelled) as the provider says; false if not pending.
    async fn close_charge(&self, tenant: TenantId, id: i64, status: &str, now: DateTime<Utc>) -> StoreResult<bool>;
    async fn charge(&self, tenant: TenantId, id: i64) -> StoreResult<Option<Charge>>;
    /// Charges that can no longer be paid here (expired, cancelled) but were not withdrawn at
    /// their provider yet, with their tenant, oldest first.
    async fn charges_to_withdraw(&self, limit: i64) -> StoreResult<Vec<(TenantId, Charge)>>;
    /// Records charge `id` withdrawn at its provider; a pending one becomes `cancelled`. False
    /// when it was no longer pending, expired or cancelled (paid meanwhile).
    async fn mark_withdrawn(&self, tenant: TenantId, id: i64, now: DateTime<Utc>) -> StoreResult<bool>;
    async fn charge_by_key(&self, tenant: TenantId, key: &LedgerKey) -> StoreResult<Option<Charge>>;
    /// The tenant's charges created at or after `since`, optionally of one status, newest first.
    async fn charges(
        &self,
        tenant: TenantId,
        status: Option<&str>,
        since: DateTime<Utc>,
        limit: i64,
    ) -> StoreResult<Vec<Charge>>;
    /// When the contact of `conversation` last wrote (the 24-hour window's start).
    async fn last_inbound_at(
        &self,
        tenant: TenantId,
        conversation: ConversationId,
    ) -> StoreResult<Option<DateTime<Utc>>>;
    /// The contacts with a number who wrote since `since`, the latest first: whom a new charge
    /// is most likely for.
    async fn recent_customers(
        &self,
        tenant: TenantId,
        since: DateTime<Utc>,
        limit: i64,
    ) -> StoreResult<Vec<RecentCustomer>>;
}

/// A contact who wrote lately, as the staff's "Nova cobrança" offers them.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct RecentCustomer {
    /// Digits, as WhatsApp reports them.
    pub wa_id: String,
    pub profile_name: Option<String>,
    pub last_at: DateTime<Utc>,
}

impl ChargeStore for Store {
    async fn record_charge(
        &self,
        new: &NewCharge<'_>,
        fence: Fence<'_>,
        messages: &(dyn Fn(&Charge) -> Vec<NewOutbound> + Send + Sync),
        render: &(dyn Fn(&Charge) -> Value + Send + Sync),
        now: DateTime<Utc>,
    ) -> StoreResult<Option<Charge>> {
        writing!(self, pool => {
            let mut tx = pool.begin_write().await?;
            let Some(held) = hold_fence!(tx, new.tenant, fence)? else {
                return Ok(None);
            };
            let inserted: Option<Charge> = sqlx::query_as(concat!(
                "INSERT INTO charges
                     (tenant_id, action_id, idempotency_key, txid, gateway, provider_ref, amount_cents, description,
                      customer_phone, customer_conversation_id, merchant_conversation_id, status, copia_e_cola,
                      delivery, expires_at, created_at, updated_at, appointment_id)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 'pending', $12, $13, $14, $15, $15, $16)
                 ON CONFLICT (tenant_id, idempotency_key) DO NOTHING
                 RETURNING ",
                charge_columns!()
            ))
            .bind(new.tenant.0)
            .bind(new.action.map(|a| a.to_string()))
            .bind(new.key.as_str())
            .bind(new.txid)
            .bind(new.gateway)
            .bind(new.provider_ref)
            .bind(new.amount.0)
            .bind(new.description)
            .bind(new.customer_phone.as_str())
            .bind(new.customer_conversation.0)
            .bind(new.merchant_conversation.map(|c| c.0))
            .bind(new.copia_e_cola)
            .bind(new.delivery)
            .bind(new.expires_at)
            .bind(now)
            .bind(new.appointment)
            .fetch_optional(&mut *tx)
            .await?;
            let charge = match inserted {
                Some(charge) => {
                    for message in messages(&charge) {
                        let _: Option<i64> = insert_outbound!(tx, message, now)?;
                    }
                    // A notification that came before this record, kept as unmatched or still
                    // looking for its charge, is about this charge after all: it is looked at
                    // now, with its looks counted from here. (Its looks for a missing charge
                    // used to count toward the provider's backoff, so a charge recorded half a
                    // minute late waited a minute or two more for its payment.)
                    sqlx::query(
                        "UPDATE payment_events SET status = 'received', attempts = 0, next_attempt_at = $1,
                             processed_at = NULL, last_error = NULL
                         WHERE tenant_id = $2 AND (status = 'unmatched' OR (status = 'received' AND last_error = $5))
                           AND ((ref_kind = 'txid' AND charge_ref = $3) OR (ref_kind <> 'txid' AND charge_ref = $4))",
                    )
                    .bind(now)
                    .bind(new.tenant.0)
                    .bind(new.txid)
                    .bind(new.provider_ref)
                    .bind(super::NO_CHARGE_YET)
                    .execute(&mut *tx)
                    .await?;
                    charge
                }
                // An earlier attempt recorded it (and its messages) and died before settling.
                None => {
                    sqlx::query_as(concat!(
                        "SELECT ", charge_columns!(), " FROM charges WHERE tenant_id = $1 AND idempotency_key = $2"
                    ))
                    .bind(new.tenant.0)
                    .bind(new.key.as_str())
                    .fetch_one(&mut *tx)
                    .await?
                }
            };
            let result = render(&charge);
            if !settle_in_tx!(tx, new.tenant, held, &format!("charge:{}", charge.id), &result, now)? {
                return Ok(None);
            }
            tx.commit().await?;
            fence.mark_settled();
            Ok(Some(charge))
        })
    }

    async fn mark_charge_paid(
        &self,
        tenant: TenantId,
        id: i64,
        end_to_end_id: Option<&str>,
        notices: &(dyn Fn(&Charge) -> Vec<NewOutbound> + Send + Sync),
        now: DateTime<Utc>,
    ) -> StoreResult<Option<Charge>> {
        writing!(self, pool => {
            let mut tx = pool.begin_write().await?;
            let paid = pay_charge!(tx, tenant, id, end_to_end_id, now, "status = 'pending'")?;
            let Some(paid) = paid else {
                tx.rollback().await?;
                return Ok(None);
            };
            for message in notices(&paid) {
                let _: Option<i64> = insert_outbound!(tx, message, now)?;
            }
            tx.commit().await?;
            Ok(Some(paid))
        })
    }

    async fn expire_charges(&self, now: DateTime<Utc>) -> StoreResult<u64> {
        Ok(writing!(self, pool => {
            // A provider's charge may still be paid after its nominal expiry: it is closed when the
            // provider says so (the poller), never by this clock alone.
            sqlx::query(
                "UPDATE charges SET status = 'expired', updated_at = $1
                 WHERE status = 'pending' AND expires_at <= $1 AND gateway = 'sandbox'",
            )
                .bind(now)
                .execute(pool)
                .await
                .map(|r| r.rows_affected())
        })?)
    }

    async fn close_charge(&self, tenant: TenantId, id: i64, status: &str, now: DateTime<Utc>) -> StoreResult<bool> {
        Ok(writing!(self, pool => {
            sqlx::query(
                "UPDATE charges SET status = $1, updated_at = $2 WHERE tenant_id = $3 AND id = $4 AND status = 'pending'",
            )
            .bind(status)
            .bind(now)
            .bind(tenant.0)
            .bind(id)
            .execute(pool)
            .await
            .map(changed_one)
        })?)
    }

    async fn charges_to_withdraw(&self, limit: i64) -> StoreResult<Vec<(TenantId, Charge)>> {
        #[derive(sqlx::FromRow)]
        struct Row {
            tenant_id: i64,
            #[sqlx(flatten)]
            charge: Charge,
        }
        let rows: Vec<Row> = reading!(self, pool => {
            sqlx::query_as(concat!(
                "SELECT tenant_id, ", charge_columns!(), " FROM charges
                 WHERE status IN ('expired', 'cancelled') AND withdrawn_at IS NULL AND gateway <> 'sandbox'
                 ORDER BY id LIMIT $1"
            ))
            .bind(limit)
            .fetch_all(pool)
            .await
        })?;
        Ok(rows.into_iter().map(|r| (TenantId(r.tenant_id), r.charge)).collect())
    }

    async fn mark_withdrawn(&self, tenant: TenantId, id: i64, now: DateTime<Utc>) -> StoreResult<bool> {
        Ok(writing!(self, pool => {
            sqlx::query(
                "UPDATE charges SET withdrawn_at = $1, updated_at = $1,
                     status = CASE WHEN status = 'pending' THEN 'cancelled' ELSE status END
                 WHERE tenant_id = $2 AND id = $3 AND status IN ('pending', 'expired', 'cancelled')",
            )
            .bind(now)
            .bind(tenant.0)
            .bind(id)
            .execute(pool)
            .await
            .map(changed_one)
        })?)
    }

    async fn charge(&self, tenant: TenantId, id: i64) -> StoreResult<Option<Charge>> {
        Ok(reading!(self, pool => {
            sqlx::query_as(concat!("SELECT ", charge_columns!(), " FROM charges WHERE tenant_id = $1 AND id = $2"))
                .bind(tenant.0)
                .bind(id)
                .fetch_optional(pool)
                .await
        })?)
    }

    async fn charge_by_key(&self, tenant: TenantId, key: &LedgerKey) -> StoreResult<Option<Charge>> {
        Ok(reading!(self, pool => {
            sqlx::query_as(concat!(
                "SELECT ", charge_columns!(), " FROM charges WHERE tenant_id = $1 AND idempotency_key = $2"
            ))
            .bind(tenant.0)
            .bind(key.as_str())
            .fetch_optional(pool)
            .await
        })?)
    }

    async fn charges(
        &self,
        tenant: TenantId,
        status: Option<&str>,
        since: DateTime<Utc>,
        limit: i64,
    ) -> StoreResult<Vec<Charge>> {
        Ok(reading!(self, pool => {
            sqlx::query_as(concat!(
                "SELECT ", charge_columns!(), " FROM charges
                 WHERE tenant_id = $1 AND ($2 IS NULL OR status = $2) AND created_at >= $3
                 ORDER BY created_at DESC, id DESC LIMIT $4"
            ))
            .bind(tenant.0)
            .bind(status)
            .bind(since)
            .bind(limit)
            .fetch_all(pool)
            .await
        })?)
    }

    async fn recent_customers(
        &self,
        tenant: TenantId,
        since: DateTime<Utc>,
        limit: i64,
    ) -> StoreResult<Vec<RecentCustomer>> {
        Ok(reading!(self, pool => {
            sqlx::query_as(
                "SELECT c.wa_id, c.profile_name, MAX(m.received_at) AS last_at
                 FROM inbound_messages m
                 JOIN conversations v ON v.id = m.conversation_id AND v.tenant_id = m.tenant_id
                 JOIN contacts c ON c.id = v.contact_id AND c.tenant_id = v.tenant_id
                 WHERE m.tenant_id = $1 AND m.received_at >= $2 AND c.wa_id IS NOT NULL
                 GROUP BY c.id, c.wa_id, c.profile_name
                 ORDER BY last_at DESC
                 LIMIT $3",
            )
            .bind(tenant.0)
            .bind(since)
            .bind(limit)
            .fetch_all(pool)
            .await
        })?)
    }

    async fn last_inbound_at(
        &self,
        tenant: TenantId,
        conversation: ConversationId,
    ) -> StoreResult<Option<DateTime<Utc>>> {
        Ok(reading!(self, pool => {
            sqlx::query_scalar(
                "SELECT MAX(received_at) FROM inbound_messages WHERE tenant_id = $1 AND conversation_id = $2",
            )
            .bind(tenant.0)
            .bind(conversation.0)
            .fetch_one(pool)
            .await
        })?)
    }
}
