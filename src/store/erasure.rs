//! Erasure: a contact's personal data removed in one transaction, the books kept (see
//! `crate::privacy` for exactly what is erased and what is kept, and why).

use chrono::{DateTime, Utc};
use serde_json::json;
use sqlx::types::Json;

use super::{Dialect, Store, StoreError, StoreResult, writing};
use crate::actions::ActionPayload;
use crate::domain::{ActionId, Cents, ContactId, PhoneE164, TenantId};
use crate::whatsapp::OutboundMessage;

/// What the erasure writes in place of personal data.
#[derive(Debug, Clone)]
pub struct Redactions {
    /// The text left where a message, an offer or a description was.
    pub text: String,
    /// The outbound message left in place of each one sent or queued.
    pub message: OutboundMessage,
}

#[allow(async_fn_in_trait)]
pub trait ErasureStore {
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

impl ErasureStore for Store {
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
                     profile_name = NULL, payer_document = NULL, erased_at = $2,
                     opted_out_at = COALESCE(opted_out_at, $2), updated_at = $2
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
                // Refund offers of those charges quote the number and the description; the refund
                // itself (an amount of a charge) goes on as it was.
                sqlx::query(
                    "UPDATE pending_actions SET offer_text = $1, updated_at = $2
                     WHERE tenant_id = $3 AND kind = 'refund' AND EXISTS (
                         SELECT 1 FROM charges c WHERE c.tenant_id = pending_actions.tenant_id
                           AND c.customer_conversation_id = $4 AND pending_actions.subject LIKE 'refund:' || c.id || ':%')",
                )
                .bind(text).bind(now).bind(t).bind(v).execute(&mut *tx).await?;
            }
            // The merchant's charge proposals name the customer by number (payload and subject).
            if let Some(number) = wa_id.as_deref().and_then(|digits| PhoneE164::parse(digits).ok()) {
                let rows: Vec<(String, Json<ActionPayload>)> = sqlx::query_as(
                    "SELECT id, payload FROM pending_actions
                     WHERE tenant_id = $1 AND kind = 'charge' AND (subject LIKE $2 OR subject LIKE $3)",
                )
                .bind(tenant.0)
                .bind(format!("charge:+{}:%", number.match_key()))
                // Proposals made before subjects used the match key name the number as typed.
                .bind(format!("charge:{number}:%"))
                .fetch_all(&mut *tx)
                .await?;
                for (id, Json(payload)) in rows {
                    let amount = match payload {
                        ActionPayload::Charge { amount, .. } => amount,
                        _ => Cents(0),
                    };
                    let redacted = ActionPayload::Charge {
                        customer_phone: phone.clone(),
                        amount,
                        description: text.to_owned(),
                        payer_document: None,
                    };
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
