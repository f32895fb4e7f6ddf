//! A customer's CPF or CNPJ, asked for by a deposit whose Pix provider needs it: a
//! [`TurnHandler`] wrapped around the customers' handler.
//!
//! Invariants: a turn is taken here only when its last message is a typed text that is, as a
//! whole, a valid CPF or CNPJ (an optional leading "CPF"/"CNPJ" aside), the tenant's gateway
//! needs one, the contact has none yet, and it has a running hold whose deposit has no charge
//! yet (what the question was asked for); everything else goes to the wrapped handler, so a
//! number typed for another reason is never taken, and a document is never replaced here. The
//! document is stored on the contact (personal data: exported and erased with it), the deposit
//! sweep charges the hold at its next round, and the thanks go under the turn's first reply key.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::Utc;

use crate::domain::PayerDocument;
use crate::jobs::{Replier, Turn, TurnHandler};
use crate::messages::{DepositText, deposit_text};
use crate::store::{DepositStore, Store};
use crate::whatsapp::OutboundMessage;

/// Takes a customer's CPF or CNPJ for a waiting deposit; hands every other turn to `inner`.
pub struct PayerDocumentGate {
    pub store: Store,
    pub replier: Replier,
    pub inner: Arc<dyn TurnHandler>,
}

impl PayerDocumentGate {
    pub fn wrap(store: Store, replier: Replier, inner: Arc<dyn TurnHandler>) -> Arc<dyn TurnHandler> {
        Arc::new(Self { store, replier, inner })
    }

    /// The document this turn brings for a waiting deposit, if it is one this handler takes.
    async fn document_of(&self, turn: &Turn) -> anyhow::Result<Option<PayerDocument>> {
        if turn.contact.payer_document.is_some() {
            return Ok(None);
        }
        let Some(last) = turn.messages.last().filter(|m| m.kind == "text") else { return Ok(None) };
        let Some(document) = last.body.as_deref().and_then(PayerDocument::from_message) else { return Ok(None) };
        let needs = turn.tenant.settings.pix.as_ref().is_some_and(|pix| pix.requires_payer_document());
        let now = self.store.db_time(Utc::now());
        if !needs || !self.store.awaits_deposit_charge(turn.tenant.id, turn.contact.contact_id, now).await? {
            return Ok(None);
        }
        Ok(Some(document))
    }
}

#[async_trait]
impl TurnHandler for PayerDocumentGate {
    async fn handle(&self, turn: &Turn) -> anyhow::Result<()> {
        let Some(document) = self.document_of(turn).await? else {
            return self.inner.handle(turn).await;
        };
        let now = self.store.db_time(Utc::now());
        if !self.store.set_payer_document(turn.tenant.id, turn.contact.contact_id, &document, now).await? {
            return Ok(()); // erased meanwhile: nobody to thank
        }
        tracing::info!(tenant = %turn.tenant.id, contact = turn.contact.contact_id.0, "payer document received for a deposit");
        self.replier.reply(turn, 0, OutboundMessage::text(deposit_text(DepositText::DocumentReceived)?)?);
        Ok(())
    }
}
