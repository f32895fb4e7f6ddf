//! What a stored row means for a call that finds it (replay it, or take it over), and what a
//! handler's result stores and tells the model. Pure: no I/O, so every branch is tested alone.

use std::cmp::Ordering;

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::call::{CallContext, Outcome, ToolFailure};
use super::{ExecutionRecord, LedgerState};
use crate::store::Settlement;

/// What to do with an existing row.
pub(super) enum Decision {
    Replay(Outcome),
    TakeOver,
}

/// What a handler's result stores in the ledger, and what the agent is told.
pub(super) fn settlement_of(result: &Result<Value, ToolFailure>) -> (Settlement<'_>, Outcome) {
    match result {
        Ok(value) => (
            Settlement { state: LedgerState::Succeeded, result: Some(value), error: None },
            Outcome::Executed(value.clone()),
        ),
        Err(ToolFailure::Permanent { message, details }) => (
            Settlement { state: LedgerState::FailedPermanent, result: Some(details), error: Some(message) },
            Outcome::Failed { error: message.clone(), details: details.clone() },
        ),
        Err(ToolFailure::Refused { message, details }) => (
            Settlement { state: LedgerState::Refused, result: Some(details), error: Some(message) },
            Outcome::Failed { error: message.clone(), details: details.clone() },
        ),
        Err(ToolFailure::Transient(e)) => (
            Settlement { state: LedgerState::FailedTransient, result: None, error: Some(e) },
            Outcome::Retryable { error: e.clone() },
        ),
        Err(ToolFailure::Unknown(e)) => (
            Settlement { state: LedgerState::OutcomeUnknown, result: None, error: Some(e) },
            Outcome::Retryable { error: format!("the outcome is unknown ({e}); the next attempt checks first") },
        ),
    }
}

pub(super) fn decide(
    row: &ExecutionRecord,
    fingerprint: &str,
    ctx: &CallContext<'_>,
    now: DateTime<Utc>,
    hint: &'static str,
) -> Decision {
    let state = row.state();
    let same = row.fingerprint == fingerprint;
    // An attempt of a turn that a later attempt replaced (it lost the job's lease and has not
    // noticed yet) takes nothing over from it: the later attempt may have ended already, and a
    // row taken now would be left running when this one is stopped.
    if row_attempt_of_this_turn(row, ctx) == Some(Ordering::Greater) {
        return Decision::Replay(Outcome::AlreadyInProgress);
    }
    // A failure left nothing behind, so a changed request may take its place (a corrected
    // service id after "unknown service", say).
    if !same
        && !matches!(
            state,
            Some(
                LedgerState::FailedTransient
                    | LedgerState::FailedPermanent
                    | LedgerState::Superseded
                    | LedgerState::Refused
            )
        )
    {
        return Decision::Replay(Outcome::Conflict {
            existing: row.arguments.0.clone(),
            existing_result: row.result.as_ref().map(|r| r.0.clone()),
            hint,
        });
    }
    match state {
        Some(LedgerState::Succeeded) => {
            Decision::Replay(Outcome::AlreadyDone(row.result.as_ref().map(|r| r.0.clone()).unwrap_or(Value::Null)))
        }
        Some(LedgerState::FailedPermanent) if !same => Decision::TakeOver,
        Some(LedgerState::FailedPermanent) => Decision::Replay(Outcome::Failed {
            error: row.error.clone().unwrap_or_default(),
            details: row.result.as_ref().map(|r| r.0.clone()).unwrap_or(Value::Null),
        }),
        Some(LedgerState::Running)
            if row.locked_until.is_some_and(|until| until > now)
                && row_attempt_of_this_turn(row, ctx) != Some(Ordering::Less) =>
        {
            Decision::Replay(Outcome::AlreadyInProgress)
        }
        Some(
            LedgerState::Running
            | LedgerState::FailedTransient
            | LedgerState::OutcomeUnknown
            | LedgerState::Superseded
            | LedgerState::Refused,
        ) => Decision::TakeOver,
        None => Decision::Replay(Outcome::Failed {
            error: format!("unknown ledger state {}", row.status),
            details: Value::Null,
        }),
    }
}

/// How the attempt that last held `row` compares with the one making this call, when both are
/// attempts of the same turn. An earlier one lost the job's lease (this attempt holds it), so
/// waiting for its ledger lease would only leave the customer told "being processed" while
/// nothing happens; a later one replaced this attempt, which must take nothing from it.
fn row_attempt_of_this_turn(row: &ExecutionRecord, ctx: &CallContext<'_>) -> Option<Ordering> {
    match (ctx.turn, ctx.turn_attempt, row.turn_id, row.turn_attempt) {
        (Some(turn), Some(attempt), Some(row_turn), Some(row_attempt)) if turn.0 == row_turn => {
            Some(row_attempt.cmp(&attempt))
        }
        _ => None,
    }
}
