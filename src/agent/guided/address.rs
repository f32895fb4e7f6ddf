//! "endereço": the business's address from its tenant file, as a WhatsApp location pin when
//! the file gives coordinates (then the text and the menu under it), else as text.

use super::{GuidedTurn, Screen, T, guided};
use crate::jobs::Turn;
use crate::whatsapp::OutboundMessage;

impl GuidedTurn {
    pub(super) async fn address(&self, turn: &Turn) -> anyhow::Result<Screen> {
        let mut screen = self.menu(turn).await?;
        let Some(address) = &turn.tenant.settings.address else {
            screen.text = guided(T::NoAddress)?;
            return Ok(screen);
        };
        screen.text = guided(T::Address { business: &turn.tenant.name, address: &address.text })?;
        if let Some(pin) = address.pin {
            let name = Some(turn.tenant.name.clone());
            match OutboundMessage::location(pin.latitude(), pin.longitude(), name, Some(address.text.clone())) {
                Ok(location) => screen.lead = Some(location),
                // The text still says where: a pin Meta would refuse is not worth a failed turn.
                Err(e) => tracing::warn!(error = %e, "the business's location pin is not sendable"),
            }
        }
        Ok(screen)
    }
}
