//! Proposing an action: inside a ledger call, store it, queue the buttons that offer it and
//! settle the call, in one transaction. A repeated proposal (a retried turn, the model calling
//! twice) replays the call's stored result: the same action, not a second one.

use chrono::{DateTime, TimeDelta, Utc};
use serde_json::{Value, json};

use super::{ActionId, ActionKind, ActionPayload, ClickId, Decision, PendingAction};
use crate::jobs::Replier;
use crate::ledger::{ToolCall, ToolFailure};
use crate::messages::{ActionText, action_text};
use crate::store::{ActionStore, NewAction, Store};
use crate::whatsapp::message::{BUTTON_TITLE_MAX, INTERACTIVE_BODY_MAX, clip};
use crate::whatsapp::{OutboundMessage, ReplyButton};

/// How long a proposal waits for its click. Long enough to find the phone, short enough that
/// a button found in the chat days later does nothing.
pub fn time_to_live(kind: ActionKind) -> TimeDelta {
    match kind {
        ActionKind::Charge => TimeDelta::hours(1),
        ActionKind::Cancellation | ActionKind::Booking | ActionKind::Move => TimeDelta::minutes(30),
        // A refund may wait for the staff to be back (one offered for a late payment, say).
        ActionKind::Attendance | ActionKind::Refund => TimeDelta::hours(24),
    }
}

/// An action to propose.
pub struct Proposal {
    pub payload: ActionPayload,
    /// What the person is asked, in pt-BR.
    pub text: String,
    pub expires_at: DateTime<Utc>,
}

impl Proposal {
    pub fn new(payload: ActionPayload, text: String, now: DateTime<Utc>) -> Self {
        let expires_at = now + time_to_live(payload.kind());
        Self { payload, text, expires_at }
    }
}

/// The buttons that offer `action`: their ids carry the action id and the decision, nothing
/// else.
pub fn offer_message(id: ActionId, kind: ActionKind, text: &str) -> anyhow::Result<OutboundMessage> {
    let (yes, no) = match kind {
        ActionKind::Attendance => (ActionText::AttendYes, ActionText::AttendNo),
        ActionKind::Cancellation => (ActionText::CancelYes, ActionText::CancelNo),
        // "Cancelar" under a move would read as cancelling the booking.
        ActionKind::Move => (ActionText::ConfirmButton, ActionText::CancelNo),
        _ => (ActionText::ConfirmButton, ActionText::DeclineButton),
    };
    let button = |decision, label| -> anyhow::Result<ReplyButton> {
        Ok(ReplyButton { id: ClickId::new(id, decision).id(), title: clip(&action_text(label)?, BUTTON_TITLE_MAX) })
    };
    Ok(OutboundMessage::buttons(
        clip(text, INTERACTIVE_BODY_MAX),
        None,
        vec![button(Decision::Confirm, yes)?, button(Decision::Decline, no)?],
    )?)
}

/// What the model (or the guided menu) learns from a proposal.
pub fn proposal_json(action: &PendingAction) -> Value {
    json!({
        "status": "awaiting_confirmation",
        "action_id": action.id.to_string(),
        "kind": action.kind().as_str(),
        "expires_at": action.expires_at.to_rfc3339(),
        "customer_sees": action.offer_text,
        "note": "Nothing happened yet: the person must tap Confirmar on the buttons just sent.",
    })
}

/// Proposes actions from inside ledger calls.
#[derive(Clone)]
pub struct Proposer {
    pub store: Store,
    pub replier: Replier,
}

/// What the model learns when the same request was proposed and answered already.
fn answered_json(action: &PendingAction) -> Value {
    let executed = action.status == super::ActionStatus::Executed;
    json!({
        "status": action.status.as_str(),
        "action_id": action.id.to_string(),
        "kind": action.kind().as_str(),
        "already_done": executed,
        "note": format!(
            "This request was already proposed and the person's answer is in: {}. Nothing new was sent.",
            action.status.as_str()
        ),
    })
}

impl Proposer {
    /// Stores the proposal, queues its buttons to the call's conversation and settles the call
    /// with [`proposal_json`], in one transaction.
    ///
    /// A decision releases its proposal's ledger row (a later request about the same thing is
    /// judged afresh), so a turn retried after its proposal was answered, by the same trigger
    /// message, would offer the buttons again: a second charge for one request one tap away.
    /// The action that request proposed is answered instead.
    pub async fn propose(&self, call: &ToolCall<'_>, proposal: Proposal) -> Result<Value, ToolFailure> {
        let ctx = call.ctx;
        let Some(attempt) = call.attempt else {
            return Err(ToolFailure::Transient("proposals run through the ledger".into()));
        };
        if let Some(trigger) = ctx.trigger_message_id {
            let (kind, subject) = (proposal.payload.kind(), proposal.payload.subject());
            let answered = self
                .store
                .answered_proposal(ctx.tenant.id, ctx.conversation, trigger, kind.as_str(), &subject)
                .await
                .map_err(ToolFailure::storage)?;
            if let Some(action) = answered {
                return Ok(answered_json(&action));
            }
        }
        let id = ActionId::random();
        let kind = proposal.payload.kind();
        let to = self.replier.destination(ctx.tenant, ctx.conversation).await.map_err(ToolFailure::storage)?;
        let message = offer_message(id, kind, &proposal.text).map_err(ToolFailure::storage)?;
        let offer = to
            .message(format!("action:{}:offer", id.0.simple()), message)
            .ok_or_else(|| ToolFailure::storage("bad outbox key"))?;
        let preview = PendingAction {
            id,
            tenant: ctx.tenant.id,
            conversation: ctx.conversation,
            payload: proposal.payload.clone(),
            fingerprint: proposal.payload.fingerprint(),
            status: super::ActionStatus::Pending,
            expires_at: proposal.expires_at,
            offer_text: proposal.text.clone(),
            offer_key: Some(offer.key.as_str().to_owned()),
            proposed_by: ctx.trigger_message_id.map(str::to_owned),
            confirmed_message: None,
            result: None,
            error: None,
            created_at: ctx.now,
        };
        let result = proposal_json(&preview);
        let new = NewAction {
            id,
            tenant: ctx.tenant.id,
            conversation: ctx.conversation,
            payload: &proposal.payload,
            expires_at: proposal.expires_at,
            offer_text: &proposal.text,
            proposed_by: ctx.trigger_message_id,
            offer: Some(&offer),
            settle: Some((attempt.fence, &result)),
        };
        let now = self.store.db_time(Utc::now());
        match self.store.propose_action(&new, now).await.map_err(ToolFailure::storage)? {
            Some(action) => {
                self.replier.wake();
                tracing::info!(tenant = %ctx.tenant.id, action = %action.id, kind = kind.as_str(), "action proposed");
                Ok(result)
            }
            None => Err(ToolFailure::Transient("another attempt took this call over".into())),
        }
    }

    /// Sends `action`'s buttons again, once per triggering message (a typed "sim" for a charge,
    /// a guided screen replayed).
    pub async fn offer_again(&self, call: &ToolCall<'_>, action: &PendingAction) -> anyhow::Result<()> {
        let ctx = call.ctx;
        let to = self.replier.destination(ctx.tenant, ctx.conversation).await?;
        let trigger = ctx.trigger_message_id.unwrap_or("none");
        let key = format!("action:{}:offer:{}", action.id.0.simple(), hex_tail(trigger));
        let message = offer_message(action.id, action.kind(), &action.offer_text)?;
        let offer = to.message(key, message).ok_or_else(|| anyhow::anyhow!("bad outbox key"))?;
        use crate::store::OutboxStore;
        if self.store.enqueue_outbound(&offer, self.store.db_time(Utc::now())).await?.is_some() {
            self.replier.wake();
        }
        Ok(())
    }
}

/// A short, stable digest of a provider message id for use inside a key.
fn hex_tail(wamid: &str) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(&Sha256::digest(wamid.as_bytes())[..12])
}
