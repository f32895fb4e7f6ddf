//! LGPD: a contact's opt-out, the data export and the erasure. See `crate::privacy` for what is
//! erased, what is kept and why.

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::{Value, json};
use sqlx::types::Json;

use super::jobs::hold_job_lease;
use super::outbox::insert_outbound;
use super::{Dialect, Store, StoreError, StoreResult, reading, writing};
use crate::actions::{ActionId, ActionPayload};
use crate::domain::{Cents, ContactId, PhoneE164, TenantId};
use crate::jobs::Lease;
use crate::outbox::NewOutbound;
use crate::whatsapp::OutboundMessage;

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
    pub provider_message_id: String,
    pub kind: String,
    pub body: Option<String>,
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

/// What the erasure writes in place of personal data.
#[derive(Debug, Clone)]
pub struct Redactions {
    /// The text left where a message, an offer or a description was.
    pub text: String,
    /// The outbound message left in place of each one sent or queued.
    pub message: OutboundMessage,
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
    /// Anonymizes the contact in one transaction (see `crate::privacy`). `Ok(false)` when it
    /// was erased before (nothing changes); `NotFound` when the tenant has no such contact.
    async fn erase_contact(
        &self,
        tenant: TenantId,
        contact: ContactId,
        redactions: &Redactions,
        now: DateTime<Utc>,
    ) -> StoreResult<bool>;
}

/// A placeholder that stays unique per contact and identifies no one.
pub fn erased_key(contact: ContactId) -> String {
    format!("erased:{}", contact.0)
}

/// A syntactically valid number for typed payloads that need one: country code 999 is
/// reserved (unassigned) by the ITU, so it reaches no one.
fn erased_phone(contact: ContactId) -> StoreResult<PhoneE164> {
    PhoneE164::parse(&format!("+999{:09}", contact.0.rem_euclid(1_000_000_000)))
        .map_err(|e| StoreError::Corrupt(e.to_string()))
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
                "SELECT id, wa_id, user_id, username, profile_name, created_at, opted_out_at, erased_at
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
                "SELECT m.id, m.provider_message_id, m.kind, m.body, m.received_at
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

    async fn erase_contact(
        &self,
        tenant: TenantId,
        contact: ContactId,
        redactions: &Redactions,
        now: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let erased = json!({ "erased": true });
        let text = redactions.text.as_str();
        let placeholder = erased_key(contact);
        let phone = erased_phone(contact)?;
        writing!(self, pool => {
            let mut tx = pool.begin_write().await?;
            let found: Option<(Option<String>, Option<DateTime<Utc>>)> =
                sqlx::query_as("SELECT wa_id, erased_at FROM contacts WHERE tenant_id = $1 AND id = $2")
                    .bind(tenant.0)
                    .bind(contact.0)
                    .fetch_optional(&mut *tx)
                    .await?;
            let Some((wa_id, erased_at)) = found else {
                return Err(StoreError::NotFound(format!("contact {}", contact.0)));
            };
            if erased_at.is_some() {
                tx.rollback().await?;
                return Ok(false);
            }
            let conversation: Option<i64> =
                sqlx::query_scalar("SELECT id FROM conversations WHERE tenant_id = $1 AND contact_id = $2")
                    .bind(tenant.0)
                    .bind(contact.0)
                    .fetch_optional(&mut *tx)
                    .await?;
            sqlx::query(
                "UPDATE contacts SET external_key = $1, wa_id = NULL, user_id = NULL, username = NULL,
                     profile_name = NULL, erased_at = $2, opted_out_at = COALESCE(opted_out_at, $2), updated_at = $2
                 WHERE tenant_id = $3 AND id = $4",
            )
            .bind(&placeholder)
            .bind(now)
            .bind(tenant.0)
            .bind(contact.0)
            .execute(&mut *tx)
            .await?;
            // The model's ledger rows of the customer's calls.
            sqlx::query(
                "UPDATE agent_tool_executions SET arguments = $1,
                     result = CASE WHEN result IS NULL THEN NULL ELSE $1 END, updated_at = $2
                 WHERE tenant_id = $3 AND contact_id = $4",
            )
            .bind(Json(&erased))
            .bind(now)
            .bind(tenant.0)
            .bind(contact.0)
            .execute(&mut *tx)
            .await?;
            if let Some(conversation) = conversation {
                let (t, v) = (tenant.0, conversation);
                sqlx::query("UPDATE inbound_messages SET body = NULL, raw = $1 WHERE tenant_id = $2 AND conversation_id = $3")
                    .bind(Json(&erased)).bind(t).bind(v).execute(&mut *tx).await?;
                sqlx::query(
                    "UPDATE outbound_messages SET message = $1, to_wa_id = NULL, to_user_id = NULL, last_error = NULL,
                         status = CASE WHEN status IN ('pending', 'sending', 'unknown') THEN 'cancelled' ELSE status END,
                         updated_at = $2
                     WHERE tenant_id = $3 AND conversation_id = $4",
                )
                .bind(Json(&redactions.message)).bind(now).bind(t).bind(v).execute(&mut *tx).await?;
                sqlx::query("DELETE FROM conversation_messages WHERE tenant_id = $1 AND conversation_id = $2")
                    .bind(t).bind(v).execute(&mut *tx).await?;
                sqlx::query("UPDATE conversations SET menu_state = NULL WHERE tenant_id = $1 AND id = $2")
                    .bind(t).bind(v).execute(&mut *tx).await?;
                // Turns not finished would answer someone who is no longer there; a running one loses
                // its lease here, so its late writes (history, replies) are refused.
                sqlx::query(
                    "UPDATE jobs SET state = 'completed', last_error = 'contact erased', locked_by = NULL, updated_at = $1
                     WHERE tenant_id = $2 AND conversation_id = $3 AND state IN ('available', 'retryable', 'running')",
                )
                .bind(now).bind(t).bind(v).execute(&mut *tx).await?;
                sqlx::query(
                    "UPDATE pending_actions SET offer_text = $1, confirmed_message = NULL, error = NULL,
                         status = CASE WHEN status = 'pending' THEN 'expired' ELSE status END,
                         decided_at = CASE WHEN status = 'pending' THEN $2 ELSE decided_at END, updated_at = $2
                     WHERE tenant_id = $3 AND conversation_id = $4",
                )
                .bind(text).bind(now).bind(t).bind(v).execute(&mut *tx).await?;
                sqlx::query(
                    "UPDATE charges SET description = $1, customer_phone = $2, updated_at = $3
                     WHERE tenant_id = $4 AND customer_conversation_id = $5",
                )
                .bind(text).bind(&placeholder).bind(now).bind(t).bind(v).execute(&mut *tx).await?;
            }
            // The merchant's charge proposals name the customer by number (payload and subject).
            if let Some(digits) = wa_id {
                let rows: Vec<(String, Json<ActionPayload>)> = sqlx::query_as(
                    "SELECT id, payload FROM pending_actions
                     WHERE tenant_id = $1 AND kind = 'charge' AND subject LIKE $2",
                )
                .bind(tenant.0)
                .bind(format!("charge:+{digits}:%"))
                .fetch_all(&mut *tx)
                .await?;
                for (id, Json(payload)) in rows {
                    let amount = match payload {
                        ActionPayload::Charge { amount, .. } => amount,
                        _ => Cents(0),
                    };
                    let redacted =
                        ActionPayload::Charge { customer_phone: phone.clone(), amount, description: text.to_owned() };
                    sqlx::query(
                        "UPDATE pending_actions SET payload = $1, fingerprint = $2, subject = $3, offer_text = $4,
                             result = NULL, error = NULL,
                             status = CASE WHEN status = 'pending' THEN 'expired' ELSE status END,
                             decided_at = CASE WHEN status = 'pending' THEN $5 ELSE decided_at END, updated_at = $5
                         WHERE tenant_id = $6 AND id = $7",
                    )
                    .bind(Json(&redacted))
                    .bind(redacted.fingerprint())
                    .bind(format!("charge:{placeholder}:{id}"))
                    .bind(text)
                    .bind(now)
                    .bind(tenant.0)
                    .bind(&id)
                    .execute(&mut *tx)
                    .await?;
                    if let Some(action) = ActionId::parse(&id) {
                        sqlx::query(
                            "UPDATE agent_tool_executions SET arguments = $1,
                                 result = CASE WHEN result IS NULL THEN NULL ELSE $1 END, updated_at = $2
                             WHERE tenant_id = $3 AND subject = $4",
                        )
                        .bind(Json(&erased))
                        .bind(now)
                        .bind(tenant.0)
                        .bind(action.subject())
                        .execute(&mut *tx)
                        .await?;
                    }
                }
            }
            tx.commit().await?;
            Ok(true)
        })
    }
}
