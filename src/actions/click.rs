//! The click path: a button click on a pending action, answered in its own job without the
//! model. Also the typed confirmation (`confirm_action`), which takes the same conditional
//! update and the same ledger key.
//!
//! A click job is retried like any job. Its answer is the job's reply (keyed by the job, which
//! exists once per click message), so a retry or a redelivered click answers once. A retry
//! after a crash between the confirm and the execution finds the action confirmed by this very
//! click and carries on: the ledger decides whether the effect still has to happen.
//!
//! The action's outcome ("booked", "charge sent", "presence confirmed", or why it failed) is
//! keyed by the action instead: a second click may carry out an action the first click's worker
//! left confirmed, and both clicks then end with the outcome. The campaign found a double click
//! that confirmed a presence twice that way.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::Utc;
use serde_json::{Value, json};

use super::{ActionId, ActionKind, ActionStatus, ClickId, ConfirmedVia, Decision, PendingAction, Proposer};
use crate::domain::{MENU_BOOK, MENU_MINE};
use crate::jobs::{Replier, Turn, TurnHandler};
use crate::ledger::{CallContext, Executor, Outcome, Tool, ToolCall, ToolFailure};
use crate::messages::{
    ActionText, ChargeVia, DepositText, RefundText, action_text, deposit_text, refund_text, when_at,
};
use crate::store::{ActionStore, Decider, OutboxKey, Store, TenantStore};
use crate::whatsapp::{OutboundMessage, ReplyButton};

/// What a click (or a typed confirmation) came to.
#[derive(Debug, Clone, PartialEq)]
pub enum ClickOutcome {
    /// Confirmed and carried out (or found carried out by this same click before a crash).
    Executed {
        kind: ActionKind,
        result: Value,
    },
    /// Confirmed, but the effect could not happen (slot taken meanwhile, Pix not configured):
    /// `error` as the ledger stored it, `text` what the person reads.
    Failed {
        error: String,
        text: String,
    },
    Declined,
    /// "Preciso cancelar" on a reminder: a cancellation was offered instead.
    CancellationOffered,
    AlreadyConfirmed,
    AlreadyDeclined,
    Expired,
    Superseded,
    /// Another conversation's action, or a merchant action clicked by a non-staff number.
    NotAllowed,
    /// No such action for this tenant (forged, random, or pruned).
    Unknown,
}

/// Carries out clicks. Built once; shared by every click job.
pub struct ClickHandler {
    pub store: Store,
    pub executor: Executor,
    pub execute: Arc<dyn Tool>,
    /// `cancel_booking`, for "Preciso cancelar" on a reminder.
    pub cancel_booking: Arc<dyn Tool>,
    pub proposer: Proposer,
}

impl ClickHandler {
    /// The click path over `store`, queueing its answers with `replier`; ledger leases last
    /// `lease`.
    pub fn new(
        store: Store,
        replier: Replier,
        gateways: Arc<crate::pix::Gateways>,
        lease: std::time::Duration,
    ) -> Self {
        let proposer = Proposer { store: store.clone(), replier: replier.clone() };
        Self {
            executor: Executor::new(store.clone(), lease),
            execute: Arc::new(super::ExecuteAction { store: store.clone(), replier, gateways }),
            cancel_booking: Arc::new(super::CancelBooking { proposer: proposer.clone() }),
            proposer,
            store,
        }
    }
}

/// Why a decision did not go through, read from the action as it is now.
fn why_not(action: &PendingAction, by: &Decider<'_>, now: chrono::DateTime<Utc>) -> ClickOutcome {
    if action.conversation != by.conversation || (action.kind().merchant_only() && !by.staff) {
        return ClickOutcome::NotAllowed;
    }
    match action.status {
        ActionStatus::Confirmed | ActionStatus::Executed | ActionStatus::Failed => ClickOutcome::AlreadyConfirmed,
        ActionStatus::Declined | ActionStatus::Cancelled => ClickOutcome::AlreadyDeclined,
        ActionStatus::Expired => ClickOutcome::Expired,
        ActionStatus::Superseded => ClickOutcome::Superseded,
        ActionStatus::Pending if action.expires_at <= now => ClickOutcome::Expired,
        ActionStatus::Pending => ClickOutcome::NotAllowed,
    }
}

/// Whether `by` may decide `action` at all: its conversation, a staff member for merchant
/// kinds, and never by text for money (the statement checks the same).
fn may_decide(action: &PendingAction, by: &Decider<'_>) -> bool {
    action.conversation == by.conversation
        && (!action.kind().merchant_only() || by.staff)
        && (action.kind().typed_confirmation_allowed() || by.via != ConfirmedVia::Typed)
}

/// What the person reads when a confirmed action could not happen; the ledger keeps `error`.
fn failure_text(error: &str, details: &Value) -> String {
    let text = match details["reason"].as_str() {
        Some("slot_taken" | "not_available") => ActionText::NoLongerAvailable,
        Some("customer_busy") => ActionText::CustomerBusy,
        Some("already_started") => ActionText::AlreadyStarted,
        Some("not_active" | "not_confirmed") => ActionText::NotActive,
        // Written for the merchant already (Pix not configured, outside the window).
        Some("not_possible") => return error.to_owned(),
        Some("provider_refused" | "invalid_code") => ActionText::ProviderRefused { reason: error },
        _ => ActionText::FailedGeneric,
    };
    action_text(text).unwrap_or_else(|_| error.to_owned())
}

/// Confirms `id` for `by` at `now` and carries it out. An action already confirmed but not
/// carried out (this same click before a crash, or any permitted decider after a worker gave
/// up) is carried out now: the ledger key, from the action id, makes that safe.
#[allow(clippy::too_many_arguments)]
async fn confirm_and_execute(
    store: &Store,
    executor: &Executor,
    execute: &dyn Tool,
    ctx: &CallContext<'_>,
    id: ActionId,
    by: &Decider<'_>,
    now: chrono::DateTime<Utc>,
) -> anyhow::Result<ClickOutcome> {
    let won = store.decide_action(id, Decision::Confirm, by, now).await?;
    let Some(action) = store.action(by.tenant, id).await? else { return Ok(ClickOutcome::Unknown) };
    // Cancelled by an erasure after it was confirmed: never run, not even by its own click's retry.
    if action.status == ActionStatus::Cancelled {
        return Ok(ClickOutcome::AlreadyDeclined);
    }
    let ours = action.conversation == by.conversation && action.confirmed_message.as_deref() == Some(by.message);
    let unfinished = action.status == ActionStatus::Confirmed && may_decide(&action, by);
    if !won && !ours && !unfinished {
        return Ok(why_not(&action, by, now));
    }
    if let (ActionStatus::Executed, Some(result)) = (action.status, &action.result) {
        return Ok(ClickOutcome::Executed { kind: action.kind(), result: result.clone() });
    }
    if let (ActionStatus::Failed, Some(error)) = (action.status, &action.error) {
        return Ok(ClickOutcome::Failed { error: error.clone(), text: failure_text(error, &Value::Null) });
    }
    let outcome = executor.execute(execute, ctx, &json!({ "action_id": id.to_string() })).await?;
    Ok(match outcome {
        Outcome::Executed(result) | Outcome::AlreadyDone(result) => {
            store.finish_action(by.tenant, id, ActionStatus::Executed, Some(&result), None, now).await?;
            ClickOutcome::Executed { kind: action.kind(), result }
        }
        Outcome::Failed { error, details } => {
            store.finish_action(by.tenant, id, ActionStatus::Failed, None, Some(&error), now).await?;
            ClickOutcome::Failed { text: failure_text(&error, &details), error }
        }
        // Transient: the job fails and is retried; the action stays confirmed by this click.
        Outcome::Retryable { error } => anyhow::bail!("executing action {id} failed for now: {error}"),
        Outcome::AlreadyInProgress => anyhow::bail!("action {id} is being executed by another attempt"),
        other => anyhow::bail!("unexpected outcome executing action {id}: {other:?}"),
    })
}

/// The button a click turn is about (its first message's).
fn clicked(turn: &Turn) -> Option<ClickId> {
    turn.messages.first()?.reply_id.as_deref().and_then(ClickId::parse)
}

/// The answer a click gets, in pt-BR.
fn answer(outcome: &ClickOutcome, tz: chrono_tz::Tz) -> anyhow::Result<Option<String>> {
    let when = |v: &Value| {
        v["starts_at"]
            .as_str()
            .and_then(|s| chrono::DateTime::parse_from_rfc3339(s).ok())
            .map(|t| when_at(tz, t.with_timezone(&Utc)))
            .unwrap_or_default()
    };
    let text = match outcome {
        ClickOutcome::Executed { kind, result } => match kind {
            ActionKind::Cancellation => ActionText::Cancelled { when: &when(result) },
            // Held for a deposit: the Pix follows in its own message.
            ActionKind::Booking if result["deposit"].is_object() => {
                let deposit = &result["deposit"];
                let amount = deposit["amount"].as_str().and_then(|a| crate::domain::Cents::parse_brl(a).ok());
                let until = deposit["pay_by"]
                    .as_str()
                    .and_then(|s| chrono::DateTime::parse_from_rfc3339(s).ok())
                    .map(|t| when_at(tz, t.with_timezone(&Utc)))
                    .unwrap_or_default();
                return Ok(Some(deposit_text(DepositText::Held {
                    service: result["service"].as_str().unwrap_or("?"),
                    professional: result["professional"].as_str().unwrap_or("?"),
                    when: &when(result),
                    amount: &amount.map(|a| a.to_string()).unwrap_or_default(),
                    until: &until,
                })?));
            }
            ActionKind::Booking => ActionText::Booked {
                service: result["service"].as_str().unwrap_or("?"),
                professional: result["professional"].as_str().unwrap_or("?"),
                when: &when(result),
            },
            ActionKind::Move => ActionText::Moved { when: &when(result) },
            ActionKind::Attendance => ActionText::AttendanceConfirmed { when: &when(result) },
            ActionKind::Charge => {
                let amount = result["amount"].as_str().and_then(|a| crate::domain::Cents::parse_brl(a).ok());
                return Ok(Some(action_text(ActionText::ChargeSent {
                    number: result["charge_id"].as_i64().unwrap_or_default(),
                    amount: &amount.map(|a| a.to_string()).unwrap_or_default(),
                    customer: result["customer_phone"].as_str().unwrap_or("?"),
                    via: ChargeVia::parse(result["delivery"].as_str().unwrap_or("text")),
                })?));
            }
            // A refund settled (done or refused) was told by its settlement's notice, whichever
            // path settled it; one still processing is told here.
            ActionKind::Refund if result["status"] != "processing" => return Ok(None),
            ActionKind::Refund => {
                let number = result["charge_id"].as_i64().unwrap_or_default();
                let amount = result["amount"].as_str().and_then(|a| crate::domain::Cents::parse_brl(a).ok());
                let amount = amount.map(|a| a.to_string()).unwrap_or_default();
                return Ok(Some(refund_text(RefundText::Processing { number, amount: &amount })?));
            }
        },
        ClickOutcome::Failed { text, .. } => ActionText::Failed { reason: text },
        ClickOutcome::Declined => ActionText::Declined,
        ClickOutcome::CancellationOffered => return Ok(None),
        ClickOutcome::AlreadyConfirmed => ActionText::AlreadyConfirmed,
        ClickOutcome::AlreadyDeclined => ActionText::AlreadyDeclined,
        ClickOutcome::Expired => ActionText::Expired,
        ClickOutcome::Superseded => ActionText::Superseded,
        ClickOutcome::NotAllowed => ActionText::NotAllowed,
        ClickOutcome::Unknown => ActionText::Unknown,
    };
    Ok(Some(action_text(text)?))
}

impl ClickHandler {
    async fn decide(&self, turn: &Turn) -> anyhow::Result<ClickOutcome> {
        let (Some(message), Some(click)) = (turn.messages.first(), clicked(turn)) else {
            return Ok(ClickOutcome::Unknown);
        };
        let via = if message.kind == "quick_reply" { ConfirmedVia::TemplateButton } else { ConfirmedVia::Button };
        let by = Decider {
            tenant: turn.tenant.id,
            conversation: turn.conversation,
            contact: turn.contact.contact_id,
            staff: self.store.is_staff(turn.tenant.id, turn.contact.wa_id.as_ref()).await?,
            via,
            message: &message.provider_message_id,
            simulator: message.simulated_by.as_deref(),
        };
        let ctx = turn.call_context(None);
        // Judged when the person clicked, not when the job ran.
        let now = message.received_at;
        match click.decision {
            Decision::Confirm => {
                let execute = self.execute.as_ref();
                confirm_and_execute(&self.store, &self.executor, execute, &ctx, click.action, &by, now).await
            }
            Decision::Decline => {
                let won = self.store.decide_action(click.action, Decision::Decline, &by, now).await?;
                let Some(action) = self.store.action(by.tenant, click.action).await? else {
                    return Ok(ClickOutcome::Unknown);
                };
                let ours = action.confirmed_message.as_deref() == Some(by.message);
                if !won && !ours {
                    return Ok(why_not(&action, &by, now));
                }
                match action.payload {
                    super::ActionPayload::Attendance { booking_id } => {
                        // "Preciso cancelar": offer the cancellation (its own buttons).
                        let input = json!({ "booking_id": booking_id });
                        match self.executor.execute(self.cancel_booking.as_ref(), &ctx, &input).await? {
                            Outcome::Executed(_) | Outcome::AlreadyDone(_) => Ok(ClickOutcome::CancellationOffered),
                            Outcome::Failed { error, details } => {
                                Ok(ClickOutcome::Failed { text: failure_text(&error, &details), error })
                            }
                            other => anyhow::bail!("offering the cancellation failed: {other:?}"),
                        }
                    }
                    _ => Ok(ClickOutcome::Declined),
                }
            }
        }
    }
}

#[async_trait]
impl TurnHandler for ClickHandler {
    async fn handle(&self, turn: &Turn) -> anyhow::Result<()> {
        let outcome = self.decide(turn).await?;
        // The kind of outcome only: a charge's result carries the customer's number.
        let what = match &outcome {
            ClickOutcome::Executed { kind, .. } => kind.as_str(),
            ClickOutcome::Failed { .. } => "failed",
            ClickOutcome::Declined | ClickOutcome::CancellationOffered => "declined",
            ClickOutcome::AlreadyConfirmed | ClickOutcome::AlreadyDeclined => "already decided",
            ClickOutcome::Expired => "expired",
            ClickOutcome::Superseded => "superseded",
            ClickOutcome::NotAllowed => "not allowed",
            ClickOutcome::Unknown => "unknown action",
        };
        tracing::info!(outcome = what, "click handled");
        let Some(text) = answer(&outcome, turn.tenant.timezone)? else { return Ok(()) };
        let message = match &outcome {
            // A customer's booking changed: where they go next, one tap away.
            ClickOutcome::Executed {
                kind: ActionKind::Booking | ActionKind::Move | ActionKind::Cancellation, ..
            } if !self.proposer.store.is_staff(turn.tenant.id, turn.contact.wa_id.as_ref()).await? => {
                let button = |id: &str, label| -> anyhow::Result<ReplyButton> {
                    Ok(ReplyButton { id: id.to_owned(), title: action_text(label)? })
                };
                let buttons =
                    vec![button(MENU_MINE, ActionText::AfterMine)?, button(MENU_BOOK, ActionText::AfterBook)?];
                OutboundMessage::buttons(text, None, buttons)?
            }
            _ => OutboundMessage::text(text)?,
        };
        let replier = &self.proposer.replier;
        match (&outcome, clicked(turn)) {
            // An action's outcome is told once, whichever click finds it carried out: the
            // click that confirmed it, retried, and a second click that carried it out after
            // the first one's worker stopped (or found it done) would each tell it otherwise.
            (ClickOutcome::Executed { .. } | ClickOutcome::Failed { .. }, Some(click)) => {
                let key = format!("action:{}:outcome", click.action.0.simple());
                let key = OutboxKey::parse(&key).ok_or_else(|| anyhow::anyhow!("bad outbox key {key}"))?;
                replier.reply_once(turn, key, message);
            }
            _ => replier.reply(turn, 0, message),
        }
        Ok(())
    }
}

/// `confirm_action` by typed text: booking kinds only, in the same conversation, through the
/// same conditional update and ledger key as a click. For a charge it re-sends the buttons:
/// no text, whoever wrote it, moves money.
pub async fn confirm_typed(handler: &ClickHandler, call: &ToolCall<'_>, id: ActionId) -> Result<Value, ToolFailure> {
    let ctx = call.ctx;
    let fail = |e: anyhow::Error| ToolFailure::Transient(e.to_string());
    let unknown = || ToolFailure::Permanent {
        message: "unknown action_id: use the action_id returned by the proposal".into(),
        details: json!({ "reason": "unknown_action" }),
    };
    let action = handler
        .store
        .action(ctx.tenant.id, id)
        .await
        .map_err(|e| fail(e.into()))?
        .filter(|a| a.conversation == ctx.conversation)
        .ok_or_else(unknown)?;
    if !action.kind().typed_confirmation_allowed() {
        if action.status == ActionStatus::Pending {
            handler.proposer.offer_again(call, &action).await.map_err(fail)?;
        }
        return Ok(json!({
            "status": "awaiting_button",
            "note": "Charges are confirmed only by tapping the Confirmar button; the buttons were sent again. Do not say it was confirmed.",
        }));
    }
    // The message that led to the proposal cannot also confirm it: the person must answer it.
    if action.proposed_by.is_some() && action.proposed_by.as_deref() == ctx.trigger_message_id {
        return Ok(json!({
            "status": "awaiting_confirmation",
            "note": "The person has not answered yet: only a later message (or the button) can confirm. Do not say it was done.",
        }));
    }
    let by = Decider {
        tenant: ctx.tenant.id,
        conversation: ctx.conversation,
        contact: ctx.customer,
        // Only charges need staff, and no typed text confirms a charge.
        staff: false,
        via: ConfirmedVia::Typed,
        message: ctx.trigger_message_id.unwrap_or(""),
        simulator: None,
    };
    let execute = handler.execute.as_ref();
    let outcome =
        confirm_and_execute(&handler.store, &handler.executor, execute, ctx, id, &by, ctx.now).await.map_err(fail)?;
    Ok(match outcome {
        ClickOutcome::Executed { result, .. } => json!({ "status": "executed", "result": result }),
        ClickOutcome::Failed { error, text } => {
            json!({ "status": "failed", "error": error, "tell_the_customer": text })
        }
        other => json!({ "status": format!("{other:?}").to_lowercase(), "note": "Nothing was done now." }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_booking_held_for_its_deposit_says_the_pix_is_coming() {
        let tz = chrono_tz::America::Sao_Paulo;
        let mut result = json!({
            "service": "Corte masculino",
            "professional": "Zé",
            "starts_at": "2026-03-12T14:00:00-03:00",
            "status": "confirmed",
        });
        let booked = ClickOutcome::Executed { kind: ActionKind::Booking, result: result.clone() };
        let text = answer(&booked, tz).unwrap().unwrap();
        assert!(text.starts_with("Pronto! Corte masculino com Zé marcado para 12/03 14:00"), "{text}");

        result["status"] = json!("held");
        result["deposit"] = json!({ "amount": "20.00", "pay_by": "2026-03-10T09:30:00-03:00" });
        let held = ClickOutcome::Executed { kind: ActionKind::Booking, result };
        let text = answer(&held, tz).unwrap().unwrap();
        assert!(text.starts_with("Pré-reservado: Corte masculino com Zé em 12/03 14:00"), "{text}");
        assert!(text.contains("sinal de R$ 20,00 pelo Pix que envio em seguida, até 10/03 09:30"), "{text}");
    }
}
