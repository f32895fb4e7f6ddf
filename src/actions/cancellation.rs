//! `cancel_booking`: proposes cancelling one of the customer's upcoming bookings; the customer
//! confirms with a button (or, typed, through `confirm_action`), and the confirmed action runs
//! `crate::appointments::cancel`.

use async_trait::async_trait;
use serde_json::Value;

use super::{ActionPayload, Proposal, Proposer};
use crate::appointments::customer_booking;
use crate::ledger::{Effect, FieldKind, FieldSpec, KeyPolicy, Reach, Tool, ToolCall, ToolFailure, ToolSpec};
use crate::messages::{ActionText, action_text};
use crate::store::CatalogStore;

pub struct CancelBooking {
    pub proposer: Proposer,
}

pub static CANCEL_BOOKING: ToolSpec = ToolSpec {
    name: "cancel_booking",
    description: "Asks the customer to confirm cancelling one of their upcoming bookings: sends Confirmar/Cancelar \
                  buttons and returns awaiting_confirmation. Nothing is cancelled until the customer taps Confirmar \
                  (or says so, and you call confirm_action).",
    effect: Effect::Write {
        policy: KeyPolicy::Business,
        on_conflict: "This booking was already handled. Call list_my_bookings to see the current state.",
        // A proposal: its offer message is queued after the proposal commits.
        reach: Reach::Outside,
    },
    fields: &[FieldSpec {
        name: "booking_id",
        kind: FieldKind::Id,
        required: true,
        identity: true,
        description: "From list_my_bookings.",
    }],
};

#[async_trait]
impl Tool for CancelBooking {
    fn spec(&self) -> &'static ToolSpec {
        &CANCEL_BOOKING
    }

    /// Proposes: the customer confirms with a button (or, typed, through `confirm_action`).
    async fn run(&self, call: &ToolCall<'_>) -> Result<Value, ToolFailure> {
        let ctx = call.ctx;
        let id = call.args.i64("booking_id").unwrap_or_default();
        let store = &self.proposer.store;
        let current = customer_booking(store, call, id).await?;
        let (services, _) = store.catalog(ctx.tenant.id).await.map_err(ToolFailure::storage)?;
        let service = services.iter().find(|s| s.id == current.service_id).map_or("?", |s| s.name.as_str());
        let when = crate::messages::when_at(ctx.tenant.timezone, current.starts_at);
        let text = action_text(ActionText::OfferCancellation { service, when: &when })
            .map_err(|e| ToolFailure::Transient(e.to_string()))?;
        let proposal = Proposal::new(ActionPayload::Cancellation { booking_id: id }, text, ctx.now);
        self.proposer.propose(call, proposal).await
    }
}
