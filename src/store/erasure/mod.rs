//! Erasure: a contact's personal data removed in one transaction, the books kept (see
//! `crate::privacy` for exactly what is erased and what is kept, and why).

mod scrub;
mod tombstones;

use chrono::{DateTime, Utc};
use serde_json::json;
use sqlx::types::Json;

use super::{Dialect, Store, StoreError, StoreResult, writing};
use crate::actions::ActionPayload;
use crate::domain::{ActionId, Cents, ContactId, ConversationId, Needles, PhoneE164, PrivacyKey, TenantId};
use crate::whatsapp::OutboundMessage;
use scrub::scrub_in_tx;
use tombstones::tombstones_in_tx;
pub use tombstones::{Gate, TombstoneStore};

/// What the erasure writes in place of personal data.
#[derive(Debug, Clone)]
pub struct Redactions {
    /// The text left where a message, an offer or a description was.
    pub text: String,
    /// The outbound message left in place of each one sent or queued.
    pub message: OutboundMessage,
}

/// An action a person had confirmed that had not run when the erasure landed: it is cancelled
/// (it would have run on placeholders), and whoever confirmed it is told.
#[derive(Debug, Clone)]
pub struct CancelledAction {
    pub id: ActionId,
    /// Where it was confirmed: the customer's conversation, or a staff member's.
    pub conversation: ConversationId,
    pub what: Cancelled,
}

/// What a cancelled action was about, with no one's data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cancelled {
    /// A merchant's charge, confirmed in a staff member's conversation.
    Charge { amount: Cents },
    /// A customer's booking or move to `starts_at`, confirmed in their conversation.
    Booking { starts_at: DateTime<Utc> },
    /// Another of the customer's own actions (a cancellation, a confirmed attendance).
    Other,
}

impl Cancelled {
    fn of(payload: &ActionPayload) -> Self {
        match payload {
            ActionPayload::Charge { amount, .. } => Self::Charge { amount: *amount },
            ActionPayload::Booking { starts_at, .. } | ActionPayload::Move { starts_at, .. } => {
                Self::Booking { starts_at: *starts_at }
            }
            _ => Self::Other,
        }
    }
}

#[allow(async_fn_in_trait)]
pub trait ErasureStore {
    /// Anonymizes the contact in one transaction (see `crate::privacy`) and returns the
    /// actions it cancelled. `Ok(None)` when it was erased before: its conversation is scrubbed
    /// again and nobody is told anything; `NotFound` when the tenant has no such contact.
    async fn erase_contact(
        &self,
        tenant: TenantId,
        contact: ContactId,
        redactions: &Redactions,
        key: &PrivacyKey,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<Vec<CancelledAction>>>;
    /// Contacts erased since `since` whose conversation a write reached after its erasure's scrub
    /// (a notice or offer a sweep or an effect committed just after it): text in or out, a
    /// recipient, model history, an open offer or a live turn. Erased again, they are clean.
    async fn erased_with_late_rows(&self, since: DateTime<Utc>) -> StoreResult<Vec<(TenantId, ContactId)>>;
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

/// The stored identities of the contact being erased.
#[derive(sqlx::FromRow)]
struct Erasing {
    wa_id: Option<String>,
    user_id: Option<String>,
    username: Option<String>,
    profile_name: Option<String>,
    payer_document: Option<String>,
    erased_at: Option<DateTime<Utc>>,
    conversation: Option<i64>,
}

/// The conversations of the tenant's staff numbers (either spelling of a Brazilian mobile).
macro_rules! staff_conversations {
    ($tx:ident, $tenant:expr) => {
        async {
            let phones: Vec<String> = sqlx::query_scalar("SELECT phone FROM staff WHERE tenant_id = $1")
                .bind($tenant.0)
                .fetch_all(&mut *$tx)
                .await?;
            let mut conversations = Vec::new();
            for phone in phones.iter().filter_map(|p| PhoneE164::parse(p).ok()) {
                let spellings = phone.spellings();
                let found: Vec<i64> = sqlx::query_scalar(
                    "SELECT v.id FROM conversations v JOIN contacts c ON c.id = v.contact_id AND c.tenant_id = v.tenant_id
                     WHERE v.tenant_id = $1 AND c.wa_id IN ($2, $3)",
                )
                .bind($tenant.0)
                .bind(&spellings[0])
                .bind(spellings.last())
                .fetch_all(&mut *$tx)
                .await?;
                conversations.extend(found);
            }
            conversations.sort_unstable();
            conversations.dedup();
            Ok::<_, StoreError>(conversations)
        }
        .await
    };
}

/// Ledger rows' arguments and results, replaced by `$1` at `$2` in tenant `$3`, where (the
/// caller's condition on `$4` follows). A call still running is ended, its fence's generation
/// moved, so its effect (a charge, a booking, an offer) is refused if it comes after this.
const ERASE_LEDGER_ROWS: &str = "UPDATE agent_tool_executions SET arguments = $1,
     result = CASE WHEN result IS NULL THEN NULL ELSE $1 END, error = NULL,
     status = CASE WHEN status = 'running' THEN 'failed_permanent' ELSE status END,
     generation = CASE WHEN status = 'running' THEN generation + 1 ELSE generation END,
     updated_at = $2
 WHERE tenant_id = $3 AND";

/// Pending becomes expired and confirmed becomes cancelled; executed, failed and the rest
/// keep their status (what happened, happened).
const SETTLE_STATUS: &str = "status = CASE WHEN status = 'pending' THEN 'expired'
                                           WHEN status = 'confirmed' THEN 'cancelled' ELSE status END,
     decided_at = CASE WHEN status = 'pending' THEN $2 ELSE decided_at END";

/// Inside the erasure's transaction: the customer's own side of conversation `$conversation`
/// scrubbed (messages in and out, the model's history, the menu's state, turns, actions,
/// charges, refund offers), as the module docs list; the confirmed actions it cancelled.
macro_rules! scrub_conversation_in_tx {
    ($tx:ident, $tenant:expr, $conversation:expr, $redactions:expr, $erased:expr, $text:expr, $placeholder:expr, $now:expr) => {
        async {
            let (tenant, conversation, redactions, erased, text, placeholder, now) =
                ($tenant, $conversation, $redactions, $erased, $text, $placeholder, $now);
            let mut cancelled = Vec::new();
            let (t, v) = (tenant.0, conversation);
            // First the turns: one not finished would answer someone who is no longer there. A
            // running one loses its lease here, so its late writes (history, replies) are refused;
            // one whose end is committing holds its job row, and this waits for it, so everything
            // below sees (and scrubs) what that end wrote.
            sqlx::query(
                "UPDATE jobs SET state = 'completed', last_error = 'contact erased', locked_by = NULL, updated_at = $1
                 WHERE tenant_id = $2 AND conversation_id = $3 AND state IN ('available', 'retryable', 'running')",
            )
            .bind(now).bind(t).bind(v).execute(&mut *$tx).await?;
            sqlx::query("UPDATE inbound_messages SET body = NULL, transcript = NULL, raw = $1,
                     transcript_error = CASE WHEN kind = 'audio' THEN 'erased' ELSE transcript_error END
                 WHERE tenant_id = $2 AND conversation_id = $3")
                .bind(Json(&erased)).bind(t).bind(v).execute(&mut *$tx).await?;
            sqlx::query(
                "UPDATE outbound_messages SET message = $1, to_wa_id = NULL, to_user_id = NULL, last_error = NULL,
                     status = CASE WHEN status IN ('pending', 'sending', 'unknown') THEN 'cancelled' ELSE status END,
                     updated_at = $2
                 WHERE tenant_id = $3 AND conversation_id = $4",
            )
            .bind(Json(&redactions.message)).bind(now).bind(t).bind(v).execute(&mut *$tx).await?;
            sqlx::query("DELETE FROM conversation_messages WHERE tenant_id = $1 AND conversation_id = $2")
                .bind(t).bind(v).execute(&mut *$tx).await?;
            sqlx::query("UPDATE conversations SET menu_state = NULL WHERE tenant_id = $1 AND id = $2")
                .bind(t).bind(v).execute(&mut *$tx).await?;
            // The customer's own confirmed actions (a booking, a move) would run for no one.
            let confirmed: Vec<(String, Json<ActionPayload>)> = sqlx::query_as(
                "SELECT id, payload FROM pending_actions
                 WHERE tenant_id = $1 AND conversation_id = $2 AND status = 'confirmed'",
            )
            .bind(t).bind(v).fetch_all(&mut *$tx).await?;
            cancelled.extend(confirmed.into_iter().filter_map(|(id, Json(payload))| {
                let what = Cancelled::of(&payload);
                Some(CancelledAction { id: ActionId::parse(&id)?, conversation: ConversationId(v), what })
            }));
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "UPDATE pending_actions SET offer_text = $1, confirmed_message = NULL, error = NULL, {SETTLE_STATUS},
                     updated_at = $2
                 WHERE tenant_id = $3 AND conversation_id = $4"
            )))
            .bind(text).bind(now).bind(t).bind(v).execute(&mut *$tx).await?;
            sqlx::query(
                "UPDATE charges SET description = $1, customer_phone = $2, updated_at = $3
                 WHERE tenant_id = $4 AND customer_conversation_id = $5",
            )
            .bind(text).bind(&placeholder).bind(now).bind(t).bind(v).execute(&mut *$tx).await?;
            // Refund offers of those charges quote the number and the description; the refund
            // itself (an amount of a charge, back to the account that paid) goes on as it was.
            sqlx::query(
                "UPDATE pending_actions SET offer_text = $1, updated_at = $2
                 WHERE tenant_id = $3 AND kind = 'refund' AND EXISTS (
                     SELECT 1 FROM charges c WHERE c.tenant_id = pending_actions.tenant_id
                       AND c.customer_conversation_id = $4 AND pending_actions.subject LIKE 'refund:' || c.id || ':%')",
            )
            .bind(text).bind(now).bind(t).bind(v).execute(&mut *$tx).await?;
            Ok::<_, StoreError>(cancelled)
        }
        .await
    };
}

/// An erased contact's conversation with anything of the person in it: since `$1`, any of it;
/// at any age, a message addressed to them (which the sender would never send, and which would
/// otherwise wait forever).
const LATE_ROWS: &str = "SELECT c.tenant_id, c.id FROM contacts c
     JOIN conversations v ON v.tenant_id = c.tenant_id AND v.contact_id = c.id
     WHERE c.erased_at IS NOT NULL AND (
         EXISTS (SELECT 1 FROM outbound_messages o WHERE o.tenant_id = v.tenant_id AND o.conversation_id = v.id
                 AND (o.to_wa_id IS NOT NULL OR o.to_user_id IS NOT NULL))
      OR c.erased_at >= $1 AND (
         EXISTS (SELECT 1 FROM inbound_messages i WHERE i.tenant_id = v.tenant_id AND i.conversation_id = v.id
                 AND (i.body IS NOT NULL OR i.transcript IS NOT NULL))
      OR EXISTS (SELECT 1 FROM conversation_messages m WHERE m.tenant_id = v.tenant_id AND m.conversation_id = v.id)
      OR EXISTS (SELECT 1 FROM pending_actions p WHERE p.tenant_id = v.tenant_id AND p.conversation_id = v.id
                 AND p.status IN ('pending', 'confirmed'))
      OR EXISTS (SELECT 1 FROM jobs j WHERE j.tenant_id = v.tenant_id AND j.conversation_id = v.id
                 AND j.state IN ('available', 'retryable', 'running'))))";

impl ErasureStore for Store {
    async fn erased_with_late_rows(&self, since: DateTime<Utc>) -> StoreResult<Vec<(TenantId, ContactId)>> {
        let rows: Vec<(i64, i64)> = super::reading!(self, pool => {
            sqlx::query_as(LATE_ROWS).bind(since).fetch_all(pool).await
        })?;
        Ok(rows.into_iter().map(|(t, c)| (TenantId(t), ContactId(c))).collect())
    }

    async fn erase_contact(
        &self,
        tenant: TenantId,
        contact: ContactId,
        redactions: &Redactions,
        key: &PrivacyKey,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<Vec<CancelledAction>>> {
        // The order below keeps the locks a turn, an effect and the intake take: still, one
        // that begins in the instant between two steps can meet this in a cycle, which the
        // database breaks by failing one side; this side starts again.
        let mut tries = 0;
        loop {
            match self.erase_once(tenant, contact, redactions, key, now).await {
                Err(StoreError::Database(sqlx::Error::Database(db)))
                    if tries < ERASE_RETRIES && matches!(db.code().as_deref(), Some("40P01" | "40001")) =>
                {
                    tries += 1;
                    tracing::warn!(%tenant, contact = contact.0, "an erasure met a deadlock; erasing again");
                }
                other => return other,
            }
        }
    }
}

/// Erasures started again after the database broke a deadlock they were part of.
const ERASE_RETRIES: u32 = 3;

impl Store {
    /// One try of [`ErasureStore::erase_contact`], in one transaction. The steps run in the
    /// order the other writers take their locks, so that they wait for each other rather than
    /// close a cycle:
    /// 1. the conversation's running turn: a turn whose end is committing holds its job row,
    ///    and this waits for it (so everything after sees what it wrote); one not yet there
    ///    loses its lease here, and its end writes nothing;
    /// 2. the ledger rows of the customer's calls: a call still running is ended (its fence's
    ///    generation moves), so an effect in flight writes nothing once this commits;
    /// 3. the merchant's side (charge proposals, staff messages found by what they say), the
    ///    long part, before the contact's row is locked;
    /// 4. the tombstones and the contact itself: from here the intake waits for this (it reads
    ///    the contact under a share lock) and then drops or re-homes what it was storing;
    /// 5. the customer's conversation, what is left of it (turns queued since, messages in and
    ///    out, history, offers, charges).
    async fn erase_once(
        &self,
        tenant: TenantId,
        contact: ContactId,
        redactions: &Redactions,
        key: &PrivacyKey,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<Vec<CancelledAction>>> {
        let erased = json!({ "erased": true });
        let text = redactions.text.as_str();
        let placeholder = erased_key(contact);
        let phone = erased_phone(contact)?;
        writing!(self, pool => {
            let mut tx = pool.begin_write().await?;
            let found: Option<Erasing> = sqlx::query_as(
                "SELECT c.wa_id, c.user_id, c.username, c.profile_name, c.payer_document, c.erased_at, v.id AS conversation
                 FROM contacts c LEFT JOIN conversations v ON v.tenant_id = c.tenant_id AND v.contact_id = c.id
                 WHERE c.tenant_id = $1 AND c.id = $2",
            )
            .bind(tenant.0)
            .bind(contact.0)
            .fetch_optional(&mut *tx)
            .await?;
            let Some(person) = found else {
                return Err(StoreError::NotFound(format!("contact {}", contact.0)));
            };
            if let Some(conversation) = person.conversation {
                sqlx::query(
                    "UPDATE jobs SET state = 'completed', last_error = 'contact erased', locked_by = NULL, updated_at = $1
                     WHERE tenant_id = $2 AND conversation_id = $3 AND state = 'running'",
                )
                .bind(now).bind(tenant.0).bind(conversation).execute(&mut *tx).await?;
            }
            // The model's ledger rows of the customer's calls.
            sqlx::query(sqlx::AssertSqlSafe(format!("{ERASE_LEDGER_ROWS} contact_id = $4")))
                .bind(Json(&erased))
                .bind(now)
                .bind(tenant.0)
                .bind(contact.0)
                .execute(&mut *tx)
                .await?;
            if person.erased_at.is_some() {
                // Erased before: its conversation is scrubbed again, in case something reached it
                // since (an older version let a message racing the erasure in); the merchant's side
                // is found by the identities, which are gone, so it stays as the first erasure left it.
                if let Some(conversation) = person.conversation {
                    scrub_conversation_in_tx!(tx, tenant, conversation, redactions, &erased, text, &placeholder, now)?;
                }
                tx.commit().await?;
                return Ok(None);
            }
            let number = person.wa_id.as_deref().and_then(|digits| PhoneE164::parse(digits).ok());
            let mut needles = Needles::default();
            for name in [&person.profile_name, &person.username].into_iter().flatten() {
                needles = needles.name(name);
            }
            if let Some(document) = &person.payer_document {
                needles = needles.digits(document);
            }
            if let Some(number) = &number {
                needles = needles.number(number);
            }
            // The descriptions of the customer's charges, as a staff member typed them.
            let mut typed: Vec<String> = sqlx::query_scalar(
                "SELECT c.description FROM charges c JOIN conversations v
                   ON v.tenant_id = c.tenant_id AND v.id = c.customer_conversation_id
                 WHERE c.tenant_id = $1 AND v.contact_id = $2",
            )
            .bind(tenant.0)
            .bind(contact.0)
            .fetch_all(&mut *tx)
            .await?;
            let mut cancelled = Vec::new();
            // The merchant's charge proposals name the customer by number (payload and subject).
            if let Some(number) = &number {
                let rows: Vec<(String, i64, String, Json<ActionPayload>)> = sqlx::query_as(
                    "SELECT id, conversation_id, status, payload FROM pending_actions
                     WHERE tenant_id = $1 AND kind = 'charge' AND (subject LIKE $2 OR subject LIKE $3)",
                )
                .bind(tenant.0)
                .bind(format!("charge:+{}:%", number.match_key()))
                // Proposals made before subjects used the match key name the number as typed.
                .bind(format!("charge:{number}:%"))
                .fetch_all(&mut *tx)
                .await?;
                for (id, conversation, status, Json(payload)) in rows {
                    let amount = match &payload {
                        ActionPayload::Charge { amount, description, payer_document, .. } => {
                            typed.push(description.clone());
                            if let Some(document) = payer_document {
                                needles = needles.digits(document.as_str());
                            }
                            *amount
                        }
                        _ => Cents(0),
                    };
                    let redacted = ActionPayload::Charge {
                        customer_phone: phone.clone(),
                        amount,
                        description: text.to_owned(),
                        payer_document: None,
                    };
                    sqlx::query(sqlx::AssertSqlSafe(format!(
                        "UPDATE pending_actions SET payload = $1, fingerprint = $3, subject = $4, offer_text = $5,
                             result = NULL, error = NULL, {SETTLE_STATUS}, updated_at = $2
                         WHERE tenant_id = $6 AND id = $7"
                    )))
                    .bind(Json(&redacted))
                    .bind(now)
                    .bind(redacted.fingerprint())
                    .bind(format!("charge:{placeholder}:{id}"))
                    .bind(text)
                    .bind(tenant.0)
                    .bind(&id)
                    .execute(&mut *tx)
                    .await?;
                    let Some(action) = ActionId::parse(&id) else { continue };
                    if status == "confirmed" {
                        let what = Cancelled::of(&redacted);
                        cancelled.push(CancelledAction { id: action, conversation: ConversationId(conversation), what });
                    }
                    sqlx::query(sqlx::AssertSqlSafe(format!("{ERASE_LEDGER_ROWS} subject = $4")))
                    .bind(Json(&erased))
                    .bind(now)
                    .bind(tenant.0)
                    .bind(action.subject())
                    .execute(&mut *tx)
                    .await?;
                }
            }
            // Copies on the merchant's side, found by what they say: staff messages typed or
            // received, the merchant agent's history, notices, errors.
            // A description is found only where a staff member typed it, as a whole message:
            // another customer's charge may well say "Corte e barba" too.
            let as_typed = typed.iter().fold(needles.clone(), |n, t| n.text(t));
            if !as_typed.is_empty() {
                let staff = staff_conversations!(tx, tenant)?;
                scrub_in_tx!(tx, tenant, &staff, &needles, &as_typed, text)?;
            }
            let identities = key.identities(number.as_ref(), person.user_id.as_deref(), person.username.as_deref());
            tombstones_in_tx!(tx, tenant, &identities, now)?;
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
            if let Some(conversation) = person.conversation {
                let own =
                    scrub_conversation_in_tx!(tx, tenant, conversation, redactions, &erased, text, &placeholder, now)?;
                cancelled.splice(0..0, own);
            }
            tx.commit().await?;
            Ok(Some(cancelled))
        })
    }
}
