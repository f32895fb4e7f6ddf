//! Pending actions' statements. See `crate::actions` for the invariants they uphold.
//!
//! Every way out of `pending` is one conditional update, and it supersedes the ledger rows
//! about the action (`action:<id>`) in the same transaction: a proposal replayed after its
//! action was decided would describe something no longer true, so it runs again instead.

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::types::Json;

use super::tx::{hold_fence, insert_outbound, settle_in_tx, supersede_subject};
use super::{Dialect, NewOutbound, Store, StoreError, StoreResult, changed_one, reading, writing};
use crate::actions::{ActionPayload, ActionStatus, ConfirmedVia, PendingAction};
use crate::domain::{ActionId, ContactId, ConversationId, Decision, PhoneE164, TenantId};
use crate::ledger::{Fence, Held};
use crate::whatsapp::Recipient;

/// The columns of [`ActionRow`].
macro_rules! action_columns {
    () => {
        "id, tenant_id, conversation_id, payload, fingerprint, status, expires_at, offer_text, offer_key, proposed_by, \
         confirmed_message, result, error, created_at"
    };
}

/// A click on the action (either button) received before it expired and not processed yet
/// (its turn not claimed, or claimed and not finished). Correlated on `pending_actions`.
macro_rules! clicked_in_time {
    () => {
        "SELECT 1 FROM inbound_messages i
         WHERE i.tenant_id = pending_actions.tenant_id AND i.conversation_id = pending_actions.conversation_id
           AND i.reply_id IN ('a:' || REPLACE(pending_actions.id, '-', '') || ':y',
                              'a:' || REPLACE(pending_actions.id, '-', '') || ':n')
           AND i.received_at < pending_actions.expires_at
           AND (i.turn_id IS NULL OR EXISTS (SELECT 1 FROM jobs j WHERE j.id = i.turn_id
                                             AND j.state IN ('available', 'running', 'retryable')))"
    };
}

#[derive(sqlx::FromRow)]
struct ActionRow {
    id: String,
    tenant_id: i64,
    conversation_id: i64,
    payload: Json<ActionPayload>,
    fingerprint: String,
    status: String,
    expires_at: DateTime<Utc>,
    offer_text: String,
    offer_key: Option<String>,
    proposed_by: Option<String>,
    confirmed_message: Option<String>,
    result: Option<Json<Value>>,
    error: Option<String>,
    created_at: DateTime<Utc>,
}

impl TryFrom<ActionRow> for PendingAction {
    type Error = StoreError;
    fn try_from(row: ActionRow) -> StoreResult<Self> {
        let corrupt = |what: &str| StoreError::Corrupt(format!("pending action {}: {what}", row.id));
        Ok(PendingAction {
            id: ActionId::parse(&row.id).ok_or_else(|| corrupt("id is not a UUID"))?,
            tenant: TenantId(row.tenant_id),
            conversation: ConversationId(row.conversation_id),
            payload: row.payload.0,
            fingerprint: row.fingerprint,
            status: ActionStatus::parse(&row.status).ok_or_else(|| corrupt("unknown status"))?,
            expires_at: row.expires_at,
            offer_text: row.offer_text,
            offer_key: row.offer_key,
            proposed_by: row.proposed_by,
            confirmed_message: row.confirmed_message,
            result: row.result.map(|r| r.0),
            error: row.error,
            created_at: row.created_at,
        })
    }
}

/// A proposal to store.
pub struct NewAction<'a> {
    pub id: ActionId,
    pub tenant: TenantId,
    pub conversation: ConversationId,
    pub payload: &'a ActionPayload,
    pub expires_at: DateTime<Utc>,
    /// What the person is asked.
    pub offer_text: &'a str,
    /// The trigger message of the turn that proposed it.
    pub proposed_by: Option<&'a str>,
    /// The message that offers the buttons, written in the same transaction.
    pub offer: Option<&'a NewOutbound>,
    /// The ledger row the proposal settles, with the result it stores there.
    pub settle: Option<(Fence<'a>, &'a Value)>,
}

/// Who is deciding, and through which message.
#[derive(Debug, Clone, Copy)]
pub struct Decider<'a> {
    pub tenant: TenantId,
    pub conversation: ConversationId,
    pub contact: ContactId,
    /// Whether the decider is one of the tenant's staff (merchant kinds require it).
    pub staff: bool,
    pub via: ConfirmedVia,
    /// The provider id of the click or text that decided.
    pub message: &'a str,
    /// Decided in the simulator by this admin (or way of opening it): recorded as such, with
    /// no contact as the decider, so a simulated tap never reads as a staff member's.
    pub simulator: Option<&'a str>,
}

#[allow(async_fn_in_trait)]
pub trait ActionStore {
    /// Stores a proposal, superseding the pending one of the same kind about the same subject
    /// in the conversation, writes its offer and settles its ledger row: all or nothing.
    /// `Ok(None)` when the ledger fence no longer holds (nothing was written).
    async fn propose_action(&self, new: &NewAction<'_>, now: DateTime<Utc>) -> StoreResult<Option<PendingAction>>;
    async fn action(&self, tenant: TenantId, id: ActionId) -> StoreResult<Option<PendingAction>>;
    /// pending → confirmed (not expired) or declined, if everything the decider must satisfy
    /// holds; false otherwise (nothing changes then).
    async fn decide_action(
        &self,
        id: ActionId,
        decision: Decision,
        by: &Decider<'_>,
        now: DateTime<Utc>,
    ) -> StoreResult<bool>;
    /// confirmed → executed | failed, with what happened.
    async fn finish_action(
        &self,
        tenant: TenantId,
        id: ActionId,
        status: ActionStatus,
        result: Option<&Value>,
        error: Option<&str>,
        now: DateTime<Utc>,
    ) -> StoreResult<bool>;
    /// pending → expired for up to `limit` actions past their expiry, each with the notice
    /// `notice` builds for it (none for a contact who opted out or was erased), in one
    /// transaction. Returns the expired actions.
    /// An action clicked before it expired, whose click has not been processed yet, is not
    /// expired: the click is judged by when it was received (`decide_action` at its
    /// `received_at`), so the sweep must leave it pending for the click to find.
    async fn expire_actions(
        &self,
        now: DateTime<Utc>,
        limit: i64,
        notice: &(dyn Fn(&PendingAction, Recipient) -> Option<NewOutbound> + Send + Sync),
    ) -> StoreResult<Vec<PendingAction>>;
    /// Records the reminder of `appointment` (at `starts_at`, `offset_minutes` before) and, if
    /// given, proposes its attendance action with its offer, in one transaction; false when that
    /// reminder was recorded before, or when an offer is given and the customer has opted out
    /// or been erased (nothing is written then).
    async fn record_reminder(
        &self,
        tenant: TenantId,
        appointment: i64,
        starts_at: DateTime<Utc>,
        offset_minutes: i64,
        action: Option<&NewAction<'_>>,
        now: DateTime<Utc>,
    ) -> StoreResult<bool>;
    /// Offers the refund of charge `charge` (due for one) to the staff once: claims the charge's
    /// offer and stores `actions` with their buttons in one transaction. False when it was
    /// offered already (nothing is written then).
    async fn record_refund_offer(
        &self,
        tenant: TenantId,
        charge: i64,
        actions: &[NewAction<'_>],
        now: DateTime<Utc>,
    ) -> StoreResult<bool>;
    /// The latest action about `subject` of `kind` that message `proposed_by` proposed in the
    /// conversation and that was answered since (neither pending nor superseded).
    async fn answered_proposal(
        &self,
        tenant: TenantId,
        conversation: ConversationId,
        proposed_by: &str,
        kind: &str,
        subject: &str,
    ) -> StoreResult<Option<PendingAction>>;
    /// The conversation's actions, newest first.
    async fn actions_of_conversation(
        &self,
        tenant: TenantId,
        conversation: ConversationId,
    ) -> StoreResult<Vec<PendingAction>>;
}

/// The ledger rows that described an action (its proposal) no longer do once it leaves
/// `pending`.
macro_rules! release_proposal {
    ($tx:expr, $tenant:expr, $id:expr, $now:expr) => {
        supersede_subject!($tx, $tenant, &$id.subject(), None::<&str>, None::<Held>, $now)
    };
}

/// Inside a write transaction: supersedes the pending action of `$new`'s kind about its
/// subject in its conversation, queues `$new`'s offer and inserts it; yields the new row.
macro_rules! insert_action {
    ($tx:expr, $new:expr, $now:expr) => {{
        let (new, now, payload) = ($new, $now, $new.payload);
        let older: Vec<String> = sqlx::query_scalar(
            "UPDATE pending_actions SET status = 'superseded', updated_at = $1, decided_at = $1
             WHERE tenant_id = $2 AND conversation_id = $3 AND kind = $4 AND subject = $5 AND status = 'pending'
             RETURNING id",
        )
        .bind(now)
        .bind(new.tenant.0)
        .bind(new.conversation.0)
        .bind(payload.kind().as_str())
        .bind(payload.subject())
        .fetch_all(&mut *$tx)
        .await?;
        for old in older.iter().filter_map(|o| ActionId::parse(o)) {
            release_proposal!($tx, new.tenant, old, now)?;
        }
        if let Some(offer) = new.offer {
            let _: Option<i64> = insert_outbound!($tx, offer, now)?;
        }
        let row: ActionRow = sqlx::query_as(concat!(
            "INSERT INTO pending_actions
                 (id, tenant_id, conversation_id, kind, subject, payload, fingerprint, status, expires_at,
                  offer_text, offer_key, proposed_by, created_at, updated_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, 'pending', $8, $9, $10, $11, $12, $12)
             RETURNING ",
            action_columns!()
        ))
        .bind(new.id.to_string())
        .bind(new.tenant.0)
        .bind(new.conversation.0)
        .bind(payload.kind().as_str())
        .bind(payload.subject())
        .bind(Json(payload))
        .bind(payload.fingerprint())
        .bind(new.expires_at)
        .bind(new.offer_text)
        .bind(new.offer.map(|o| o.key.as_str()))
        .bind(new.proposed_by)
        .bind(now)
        .fetch_one(&mut *$tx)
        .await?;
        row
    }};
}

impl ActionStore for Store {
    async fn propose_action(&self, new: &NewAction<'_>, now: DateTime<Utc>) -> StoreResult<Option<PendingAction>> {
        let row: ActionRow = writing!(self, pool => {
            let mut tx = pool.begin_write().await?;
            let held = match new.settle {
                Some((fence, _)) => match hold_fence!(tx, new.tenant, fence)? {
                    Some(held) => Some(held),
                    None => return Ok(None),
                },
                None => None,
            };
            let row: ActionRow = insert_action!(tx, new, now);
            if let (Some((_, result)), Some(held)) = (new.settle, held)
                && !settle_in_tx!(tx, new.tenant, held, &new.id.subject(), result, now)?
            {
                return Ok(None);
            }
            tx.commit().await?;
            if let Some((fence, _)) = new.settle {
                fence.mark_settled();
            }
            row
        });
        Ok(Some(row.try_into()?))
    }

    async fn action(&self, tenant: TenantId, id: ActionId) -> StoreResult<Option<PendingAction>> {
        let row: Option<ActionRow> = reading!(self, pool => {
            sqlx::query_as(concat!("SELECT ", action_columns!(), " FROM pending_actions WHERE tenant_id = $1 AND id = $2"))
                .bind(tenant.0)
                .bind(id.to_string())
                .fetch_optional(pool)
                .await
        })?;
        row.map(PendingAction::try_from).transpose()
    }

    async fn decide_action(
        &self,
        id: ActionId,
        decision: Decision,
        by: &Decider<'_>,
        now: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let status = match decision {
            Decision::Confirm => ActionStatus::Confirmed,
            Decision::Decline => ActionStatus::Declined,
        };
        writing!(self, pool => {
            let mut tx = pool.begin_write().await?;
            // Declining an expired action is harmless; confirming one is not. Money (a charge, a
            // refund) needs a staff decider, never a typed one.
            let decided = sqlx::query(
                "UPDATE pending_actions SET status = $9, confirmed_via = $1, confirmed_by = $2,
                     confirmed_message = $3, decided_at = $4, updated_at = $4, decided_in_simulator = $10
                 WHERE tenant_id = $5 AND id = $6 AND conversation_id = $7 AND status = 'pending'
                   AND ($9 = 'declined' OR expires_at > $4) AND (kind NOT IN ('charge', 'refund') OR ($8 AND $1 <> 'typed'))",
            )
            .bind(if by.simulator.is_some() { "simulator" } else { by.via.as_str() })
            .bind(by.simulator.is_none().then_some(by.contact.0))
            .bind(by.message)
            .bind(now)
            .bind(by.tenant.0)
            .bind(id.to_string())
            .bind(by.conversation.0)
            .bind(by.staff)
            .bind(status.as_str())
            .bind(by.simulator)
            .execute(&mut *tx)
            .await
            .map(changed_one)?;
            if decided {
                release_proposal!(tx, by.tenant, id, now)?;
            }
            tx.commit().await?;
            Ok(decided)
        })
    }

    async fn finish_action(
        &self,
        tenant: TenantId,
        id: ActionId,
        status: ActionStatus,
        result: Option<&Value>,
        error: Option<&str>,
        now: DateTime<Utc>,
    ) -> StoreResult<bool> {
        Ok(writing!(self, pool => {
            sqlx::query(
                "UPDATE pending_actions SET status = $1, result = $2, error = $3, updated_at = $4
                 WHERE tenant_id = $5 AND id = $6 AND status = 'confirmed'",
            )
            .bind(status.as_str())
            .bind(result.map(Json))
            .bind(error)
            .bind(now)
            .bind(tenant.0)
            .bind(id.to_string())
            .execute(pool)
            .await
            .map(changed_one)
        })?)
    }

    /// An action clicked before it expired, whose click has not been processed yet, is not
    /// expired: the click is judged by when it was received (`decide_action` at its
    /// `received_at`), so the sweep must leave it pending for the click to find.
    async fn expire_actions(
        &self,
        now: DateTime<Utc>,
        limit: i64,
        notice: &(dyn Fn(&PendingAction, Recipient) -> Option<NewOutbound> + Send + Sync),
    ) -> StoreResult<Vec<PendingAction>> {
        let expired: Vec<PendingAction> = writing!(self, pool => {
            let mut tx = pool.begin_write().await?;
            let sql = pool.pick(
                concat!(
                    "UPDATE pending_actions SET status = 'expired', updated_at = $1, decided_at = $1
                     WHERE id IN (SELECT id FROM pending_actions WHERE status = 'pending' AND expires_at <= $1
                                    AND NOT EXISTS (", clicked_in_time!(), ")
                                  ORDER BY expires_at LIMIT $2)
                     RETURNING ",
                    action_columns!()
                ),
                concat!(
                    "UPDATE pending_actions SET status = 'expired', updated_at = $1, decided_at = $1
                     WHERE id IN (SELECT id FROM pending_actions WHERE status = 'pending' AND expires_at <= $1
                                    AND NOT EXISTS (", clicked_in_time!(), ")
                                  ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED)
                     RETURNING ",
                    action_columns!()
                ),
            );
            let rows: Vec<ActionRow> = sqlx::query_as(sql).bind(now).bind(limit).fetch_all(&mut *tx).await?;
            for row in &rows {
                if let Some(id) = ActionId::parse(&row.id) {
                    release_proposal!(tx, TenantId(row.tenant_id), id, now)?;
                }
            }
            let actions: Vec<PendingAction> = rows.into_iter().map(PendingAction::try_from).collect::<StoreResult<_>>()?;
            for action in &actions {
                type Contact = (Option<String>, Option<String>, Option<DateTime<Utc>>, Option<DateTime<Utc>>);
                let (wa_id, user_id, opted_out_at, erased_at): Contact = sqlx::query_as(
                    "SELECT c.wa_id, c.user_id, c.opted_out_at, c.erased_at
                     FROM conversations v JOIN contacts c ON c.id = v.contact_id
                     WHERE v.tenant_id = $1 AND v.id = $2",
                )
                .bind(action.tenant.0)
                .bind(action.conversation.0)
                .fetch_one(&mut *tx)
                .await?;
                // An expiry notice is proactive: none for a contact who opted out or was erased.
                if opted_out_at.is_some() || erased_at.is_some() {
                    continue;
                }
                let recipient = Recipient { wa_id: wa_id.and_then(|w| PhoneE164::parse(&w).ok()), user_id };
                if let Some(message) = notice(action, recipient) {
                    let _: Option<i64> = insert_outbound!(tx, message, now)?;
                }
            }
            tx.commit().await?;
            actions
        });
        Ok(expired)
    }

    async fn record_reminder(
        &self,
        tenant: TenantId,
        appointment: i64,
        starts_at: DateTime<Utc>,
        offset_minutes: i64,
        action: Option<&NewAction<'_>>,
        now: DateTime<Utc>,
    ) -> StoreResult<bool> {
        writing!(self, pool => {
            let mut tx = pool.begin_write().await?;
            if action.is_some() {
                // The customer may have opted out (or been erased) since the caller looked: the
                // contact row is locked here as the opt-out locks it, so either the opt-out sees
                // this reminder's offer and withdraws it, or this sees the opt-out.
                let silenced: Option<bool> = sqlx::query_scalar(pool.pick(
                    "SELECT k.opted_out_at IS NOT NULL OR k.erased_at IS NOT NULL
                     FROM appointments a JOIN contacts k ON k.id = a.contact_id
                     WHERE a.tenant_id = $1 AND a.id = $2",
                    "SELECT k.opted_out_at IS NOT NULL OR k.erased_at IS NOT NULL
                     FROM appointments a JOIN contacts k ON k.id = a.contact_id
                     WHERE a.tenant_id = $1 AND a.id = $2 FOR UPDATE OF k",
                ))
                .bind(tenant.0)
                .bind(appointment)
                .fetch_optional(&mut *tx)
                .await?;
                if silenced != Some(false) {
                    tx.rollback().await?;
                    return Ok(false);
                }
            }
            let recorded: Option<i64> = sqlx::query_scalar(
                "INSERT INTO reminders (tenant_id, appointment_id, starts_at, offset_minutes, action_id, created_at)
                 VALUES ($1, $2, $3, $4, $5, $6)
                 ON CONFLICT (tenant_id, appointment_id, starts_at, offset_minutes) DO NOTHING
                 RETURNING appointment_id",
            )
            .bind(tenant.0)
            .bind(appointment)
            .bind(starts_at)
            .bind(offset_minutes)
            .bind(action.map(|a| a.id.to_string()))
            .bind(now)
            .fetch_optional(&mut *tx)
            .await?;
            if recorded.is_none() {
                tx.rollback().await?;
                return Ok(false);
            }
            if let Some(new) = action {
                let _row: ActionRow = insert_action!(tx, new, now);
            }
            tx.commit().await?;
            Ok(true)
        })
    }

    async fn record_refund_offer(
        &self,
        tenant: TenantId,
        charge: i64,
        actions: &[NewAction<'_>],
        now: DateTime<Utc>,
    ) -> StoreResult<bool> {
        writing!(self, pool => {
            let mut tx = pool.begin_write().await?;
            let claimed = sqlx::query(
                "UPDATE charges SET refund_offered_at = $1
                 WHERE tenant_id = $2 AND id = $3 AND refund_offered_at IS NULL AND status = 'refund_due'",
            )
            .bind(now)
            .bind(tenant.0)
            .bind(charge)
            .execute(&mut *tx)
            .await
            .map(changed_one)?;
            if !claimed {
                tx.rollback().await?;
                return Ok(false);
            }
            for new in actions {
                let _row: ActionRow = insert_action!(tx, new, now);
            }
            tx.commit().await?;
            Ok(true)
        })
    }

    async fn answered_proposal(
        &self,
        tenant: TenantId,
        conversation: ConversationId,
        proposed_by: &str,
        kind: &str,
        subject: &str,
    ) -> StoreResult<Option<PendingAction>> {
        let row: Option<ActionRow> = reading!(self, pool => {
            sqlx::query_as(concat!(
                "SELECT ", action_columns!(), " FROM pending_actions
                 WHERE tenant_id = $1 AND conversation_id = $2 AND proposed_by = $3 AND kind = $4 AND subject = $5
                   AND status NOT IN ('pending', 'superseded')
                 ORDER BY created_at DESC LIMIT 1"
            ))
            .bind(tenant.0)
            .bind(conversation.0)
            .bind(proposed_by)
            .bind(kind)
            .bind(subject)
            .fetch_optional(pool)
            .await
        })?;
        row.map(PendingAction::try_from).transpose()
    }

    async fn actions_of_conversation(
        &self,
        tenant: TenantId,
        conversation: ConversationId,
    ) -> StoreResult<Vec<PendingAction>> {
        let rows: Vec<ActionRow> = reading!(self, pool => {
            sqlx::query_as(concat!(
                "SELECT ", action_columns!(), " FROM pending_actions
                 WHERE tenant_id = $1 AND conversation_id = $2 ORDER BY created_at DESC, id"
            ))
            .bind(tenant.0)
            .bind(conversation.0)
            .fetch_all(pool)
            .await
        })?;
        rows.into_iter().map(PendingAction::try_from).collect()
    }
}
