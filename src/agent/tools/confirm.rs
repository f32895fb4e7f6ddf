//! `confirm_action`: a typed "pode cancelar" confirms a pending booking-kind action through
//! the same conditional update and ledger key as its button. A charge is never confirmed this
//! way: its buttons are sent again.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

use crate::actions::{ClickHandler, confirm_typed};
use crate::domain::ActionId;
use crate::ledger::{Effect, FieldKind, FieldSpec, KeyPolicy, Reach, Tool, ToolCall, ToolFailure, ToolSpec};

pub struct ConfirmAction {
    pub clicks: Arc<ClickHandler>,
}

pub(super) static CONFIRM_ACTION: ToolSpec = ToolSpec {
    name: "confirm_action",
    description: "Confirms a pending action (from cancel_booking) when the customer clearly said yes in text, \
                  like 'pode cancelar'. Use the action_id the proposal returned. Charges cannot be confirmed \
                  this way: only their button confirms them (this re-sends it).",
    // Per message: a later "sim" is a new request (for a charge, the buttons are sent again);
    // the effect itself is keyed by the action, whatever confirms it.
    effect: Effect::Write {
        policy: KeyPolicy::PerTurn,
        on_conflict: "This action was already confirmed.",
        reach: Reach::Outside,
    },
    fields: &[FieldSpec {
        name: "action_id",
        kind: FieldKind::Text,
        required: true,
        identity: true,
        description: "From the proposal's result.",
    }],
};

#[async_trait]
impl Tool for ConfirmAction {
    fn spec(&self) -> &'static ToolSpec {
        &CONFIRM_ACTION
    }

    async fn run(&self, call: &ToolCall<'_>) -> Result<Value, ToolFailure> {
        let id = call.args.str("action_id").and_then(ActionId::parse).ok_or_else(|| ToolFailure::Permanent {
            message: "action_id is not an action id; use the one the proposal returned".into(),
            details: Value::Null,
        })?;
        confirm_typed(&self.clicks, call, id).await
    }
}
