//! LGPD: a contact's opt-out and the data export (erasure is [`super::erasure`]). See
//! `crate::privacy` for what is erased, what is kept and why.

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;
use sqlx::types::Json;

use super::tx::{hold_job_lease, insert_outbound};
use super::{Dialect, Lease, NewOutbound, Store, StoreError, StoreResult, reading, writing};
use crate::domain::{ContactId, TenantId};

/// Withdraws a conversation's unsent proactive messages (reminders, expiry notices of
/// proposals and of deposit holds: the messages queued outside a turn an opt-out covers).
/// Binds: $1 now, $2 tenant, $3 conversation.
const WITHDRAW_PROACTIVE: &str = "UPDATE outbound_messages SET status = 'cancelled', updated_at = $1
     WHERE tenant_id = $2 AND conversation_id = $3 AND status = 'pending'
       AND (idempotency_key LIKE 'reminder:%'
            OR (idempotency_key LIKE 'action:%' AND idempotency_key LIKE '%:expired')
            OR (idempotency_key LIKE 'deposit:%' AND idempotency_key LIKE '%:expired'))";

/// A contact as the console shows it.
#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct ContactRecord {
    pub id: i64,
    pub wa_id: Option<String>,
    pub user_id: Option<String>,
    pub username: Option<String>,
    pub profile_name: Option<String>,
    /// The payer's CPF or CNPJ, compact.
    pub payer_document: Option<String>,
    pub created_at: DateTime<Utc>,
    pub opted_out_at: Option<DateTime<Utc>>,
    pub erased_at: Option<DateTime<Utc>>,
}

/// How much a contact left behind.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct ContactCounts {
    pub messages_in: i64,
    pub messages_out: i64,
    pub appointments: i64,
    pub charges: i64,
}

#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct ExportedInbound {
    pub id: i64,
    pub kind: String,
    pub body: Option<String>,
    /// A voice note's text.
    pub transcript: Option<String>,
    pub received_at: DateTime<Utc>,
}

#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct ExportedOutbound {
    pub id: i64,
    pub status: String,
    pub message: Json<Value>,
    pub created_at: DateTime<Utc>,
}

#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct ExportedAppointment {
    pub id: i64,
    pub service: String,
    pub professional: String,
    pub starts_at: DateTime<Utc>,
    pub ends_at: DateTime<Utc>,
    pub status: String,
    pub price_cents: i64,
    pub created_at: DateTime<Utc>,
}

#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct ExportedCharge {
    pub id: i64,
    pub amount_cents: i64,
    pub description: String,
    pub status: String,
    pub created_at: DateTime<Utc>,
    pub paid_at: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct ExportedAction {
    pub id: String,
    pub kind: String,
    pub status: String,
    pub offer_text: String,
    pub created_at: DateTime<Utc>,
}

/// Everything stored about one contact of one tenant (the LGPD access request).
#[derive(Debug, Clone, Serialize)]
pub struct ContactExport {
    pub contact: ContactRecord,
    pub messages_in: Vec<ExportedInbound>,
    pub messages_out: Vec<ExportedOutbound>,
    pub appointments: Vec<ExportedAppointment>,
    pub charges: Vec<ExportedCharge>,
    pub pending_actions: Vec<ExportedAction>,
}

#[allow(async_fn_in_trait)]
pub trait PrivacyStore {
    /// Sets (`opted_out`) or clears the contact's opt-out and queues `reply`, while the turn's
    /// job `lease` holds, in one transaction. Opting out also withdraws the conversation's unsent
    /// proactive messages. The first opt-out instant is kept. False when `reply` was queued
    /// before (a rerun of the same turn).
    async fn set_opt_out(
        &self,
        contact: ContactId,
        opted_out: bool,
        reply: &NewOutbound,
        lease: &Lease,
        now: DateTime<Utc>,
    ) -> StoreResult<bool>;
    /// Whether proactive messages must not reach the contact: opted out, or erased.
    async fn is_silenced(&self, tenant: TenantId, contact: ContactId) -> StoreResult<bool>;
    async fn contact_record(&self, tenant: TenantId, contact: ContactId) -> StoreResult<Option<ContactRecord>>;
    async fn contact_counts(&self, tenant: TenantId, contact: ContactId) -> StoreResult<ContactCounts>;
    /// `None` when the tenant has no such contact.
    async fn export_contact(&self, tenant: TenantId, contact: ContactId) -> StoreResult<Option<ContactExport>>;
}

impl PrivacyStore for Store {
    async fn set_opt_out(
        &self,
        contact: ContactId,
        opted_out: bool,
        reply: &NewOutbound,
        lease: &Lease,
        now: DateTime<Utc>,
    ) -> StoreResult<bool> {
        writing!(self, pool => {
            let mut tx = pool.begin_write().await?;
            if !hold_job_lease!(tx, lease, now)? {
                return Err(StoreError::LeaseLost);
            }
            let inserted: Option<i64> = insert_outbound!(tx, reply, now)?;
            if inserted.is_none() {
                // This turn already did it: a rerun changes nothing.
                tx.rollback().await?;
                return Ok(false);
            }
            let sql = if opted_out {
                "UPDATE contacts SET opted_out_at = COALESCE(opted_out_at, $1), updated_at = $1
                 WHERE tenant_id = $2 AND id = $3"
            } else {
                "UPDATE contacts SET opted_out_at = NULL, updated_at = $1 WHERE tenant_id = $2 AND id = $3"
            };
            sqlx::query(sql).bind(now).bind(reply.tenant.0).bind(contact.0).execute(&mut *tx).await?;
            if opted_out {
                sqlx::query(WITHDRAW_PROACTIVE)
                    .bind(now)
                    .bind(reply.tenant.0)
                    .bind(reply.conversation.0)
                    .execute(&mut *tx)
                    .await?;
            }
            tx.commit().await?;
            Ok(true)
        })
    }

    async fn is_silenced(&self, tenant: TenantId, contact: ContactId) -> StoreResult<bool> {
        type Marks = (Option<DateTime<Utc>>, Option<DateTime<Utc>>);
        let row: Option<Marks> = reading!(self, pool => {
            sqlx::query_as("SELECT opted_out_at, erased_at FROM contacts WHERE tenant_id = $1 AND id = $2")
                .bind(tenant.0)
                .bind(contact.0)
                .fetch_optional(pool)
                .await
        })?;
        Ok(row.is_some_and(|(out, erased)| out.is_some() || erased.is_some()))
    }

    async fn contact_record(&self, tenant: TenantId, contact: ContactId) -> StoreResult<Option<ContactRecord>> {
        Ok(reading!(self, pool => {
            sqlx::query_as(
                "SELECT id, wa_id, user_id, username, profile_name, payer_document, created_at, opted_out_at, erased_at
                 FROM contacts WHERE tenant_id = $1 AND id = $2",
            )
            .bind(tenant.0)
            .bind(contact.0)
            .fetch_optional(pool)
            .await
        })?)
    }

    async fn contact_counts(&self, tenant: TenantId, contact: ContactId) -> StoreResult<ContactCounts> {
        let (messages_in, messages_out, appointments, charges): (i64, i64, i64, i64) = reading!(self, pool => {
            sqlx::query_as(
                "SELECT
                     (SELECT COUNT(*) FROM inbound_messages m JOIN conversations v ON v.id = m.conversation_id
                      WHERE m.tenant_id = $1 AND v.tenant_id = $1 AND v.contact_id = $2),
                     (SELECT COUNT(*) FROM outbound_messages m JOIN conversations v ON v.id = m.conversation_id
                      WHERE m.tenant_id = $1 AND v.tenant_id = $1 AND v.contact_id = $2),
                     (SELECT COUNT(*) FROM appointments WHERE tenant_id = $1 AND contact_id = $2),
                     (SELECT COUNT(*) FROM charges c JOIN conversations v ON v.id = c.customer_conversation_id
                      WHERE c.tenant_id = $1 AND v.tenant_id = $1 AND v.contact_id = $2)",
            )
            .bind(tenant.0)
            .bind(contact.0)
            .fetch_one(pool)
            .await
        })?;
        Ok(ContactCounts { messages_in, messages_out, appointments, charges })
    }

    async fn export_contact(&self, tenant: TenantId, contact: ContactId) -> StoreResult<Option<ContactExport>> {
        let Some(record) = self.contact_record(tenant, contact).await? else {
            return Ok(None);
        };
        let (t, c) = (tenant.0, contact.0);
        Ok(Some(reading!(self, pool => {
            let messages_in = sqlx::query_as(
                "SELECT m.id, m.kind, m.body, m.transcript, m.received_at
                 FROM inbound_messages m JOIN conversations v ON v.id = m.conversation_id AND v.tenant_id = m.tenant_id
                 WHERE m.tenant_id = $1 AND v.contact_id = $2 ORDER BY m.id",
            )
            .bind(t).bind(c).fetch_all(pool).await?;
            let messages_out = sqlx::query_as(
                "SELECT m.id, m.status, m.message, m.created_at
                 FROM outbound_messages m JOIN conversations v ON v.id = m.conversation_id AND v.tenant_id = m.tenant_id
                 WHERE m.tenant_id = $1 AND v.contact_id = $2 ORDER BY m.id",
            )
            .bind(t).bind(c).fetch_all(pool).await?;
            let appointments = sqlx::query_as(
                "SELECT a.id, s.name AS service, p.name AS professional, a.starts_at, a.ends_at, a.status,
                        a.price_cents, a.created_at
                 FROM appointments a
                 JOIN services s ON s.id = a.service_id AND s.tenant_id = a.tenant_id
                 JOIN professionals p ON p.id = a.professional_id AND p.tenant_id = a.tenant_id
                 WHERE a.tenant_id = $1 AND a.contact_id = $2 ORDER BY a.starts_at, a.id",
            )
            .bind(t).bind(c).fetch_all(pool).await?;
            let charges = sqlx::query_as(
                "SELECT c.id, c.amount_cents, c.description, c.status, c.created_at, c.paid_at
                 FROM charges c JOIN conversations v ON v.id = c.customer_conversation_id AND v.tenant_id = c.tenant_id
                 WHERE c.tenant_id = $1 AND v.contact_id = $2 ORDER BY c.id",
            )
            .bind(t).bind(c).fetch_all(pool).await?;
            let pending_actions = sqlx::query_as(
                "SELECT a.id, a.kind, a.status, a.offer_text, a.created_at
                 FROM pending_actions a JOIN conversations v ON v.id = a.conversation_id AND v.tenant_id = a.tenant_id
                 WHERE a.tenant_id = $1 AND v.contact_id = $2 ORDER BY a.created_at, a.id",
            )
            .bind(t).bind(c).fetch_all(pool).await?;
            ContactExport { contact: record, messages_in, messages_out, appointments, charges, pending_actions }
        })))
    }
}
