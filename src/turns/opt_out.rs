//! "sair"/"parar" and "voltar": a [`TurnHandler`] wrapped around the customers' handler.
//!
//! Invariants: only a turn whose last message is a typed text equal to a command (after
//! [`command`]'s normalization) is taken here; everything else, and "voltar" from someone who is
//! not opted out (it also means "go back" in the menu), goes to the wrapped handler. Staff are
//! never opted out, even if routed here. The change and its confirmation are written in one
//! transaction under the turn's lease, the confirmation under the turn's first reply key, so a
//! rerun of the turn neither answers twice nor moves the opt-out instant.

use std::sync::Arc;

use anyhow::Context;
use async_trait::async_trait;
use chrono::Utc;

use crate::jobs::{Replier, Turn, TurnHandler};
use crate::privacy::{PrivacyText, privacy_text};
use crate::store::{NewOutbound, OutboxKey, PrivacyStore, Store, TenantStore};
use crate::whatsapp::OutboundMessage;

/// What a customer's message asks of their privacy settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// "sair", "parar": no more reminders or proactive notices.
    OptOut,
    /// "voltar": receive them again.
    OptIn,
}

/// The command a whole message is, if any: case, accents and surrounding spaces or punctuation
/// do not matter; any other word in it does.
pub fn command(body: &str) -> Option<Command> {
    match crate::domain::keyword::fold(body).as_str() {
        "sair" | "parar" => Some(Command::OptOut),
        "voltar" => Some(Command::OptIn),
        _ => None,
    }
}

/// Answers privacy commands; hands every other turn to `inner`.
pub struct OptOut {
    pub store: Store,
    pub replier: Replier,
    pub inner: Arc<dyn TurnHandler>,
}

impl OptOut {
    pub fn wrap(store: Store, replier: Replier, inner: Arc<dyn TurnHandler>) -> Arc<dyn TurnHandler> {
        Arc::new(Self { store, replier, inner })
    }

    /// The command this turn is, if it is one this handler takes.
    async fn command_of(&self, turn: &Turn) -> anyhow::Result<Option<Command>> {
        let Some(last) = turn.messages.last() else { return Ok(None) };
        let Some(command) = (last.kind == "text").then(|| last.body.as_deref().and_then(command)).flatten() else {
            return Ok(None);
        };
        if self.store.is_staff(turn.tenant.id, turn.contact.wa_id.as_ref()).await? {
            return Ok(None);
        }
        if command == Command::OptIn && !self.store.is_silenced(turn.tenant.id, turn.contact.contact_id).await? {
            return Ok(None);
        }
        Ok(Some(command))
    }
}

#[async_trait]
impl TurnHandler for OptOut {
    async fn handle(&self, turn: &Turn) -> anyhow::Result<()> {
        let Some(command) = self.command_of(turn).await? else {
            return self.inner.handle(turn).await;
        };
        let business = turn.tenant.name.as_str();
        let text = match command {
            Command::OptOut => privacy_text(PrivacyText::OptedOut { business })?,
            Command::OptIn => privacy_text(PrivacyText::OptedIn { business })?,
        };
        let local = self.replier.is_local(&turn.tenant);
        let reply = NewOutbound {
            tenant: turn.tenant.id,
            conversation: turn.conversation,
            key: OutboxKey::for_turn(turn.id, 0),
            recipient: turn.recipient(),
            message: OutboundMessage::text(text)?,
            local,
            written_by: Some(turn.lease.clone()),
            unless_handed_off: false,
        };
        let now = self.store.db_time(Utc::now());
        let changed = self
            .store
            .set_opt_out(turn.contact.contact_id, command == Command::OptOut, &reply, &turn.lease, now)
            .await
            .context("failed to record the opt-out")?;
        if changed {
            tracing::info!(tenant = %turn.tenant.id, contact = turn.contact.contact_id.0, ?command, "privacy preference changed");
            if !local {
                self.replier.wake();
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_whole_messages_whatever_the_case_accents_or_punctuation() {
        for yes in ["sair", "SAIR", " Sair! ", "parar.", "Párar", "\"sair\"", "sair 🙏"] {
            assert_eq!(command(yes), Some(Command::OptOut), "{yes:?}");
        }
        for back in ["voltar", "Voltar!!", "  VOLTAR "] {
            assert_eq!(command(back), Some(Command::OptIn), "{back:?}");
        }
        for no in ["quero sair mais cedo", "sairia", "", "!!!", "parar de fumar", "sair sair"] {
            assert_eq!(command(no), None, "{no:?}");
        }
    }
}
