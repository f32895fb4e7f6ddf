//! Which handler answers a job: a click goes to the click path (never the model); a turn goes
//! to the merchant's agent when the sender is one of the tenant's staff, else the customer's.
//! Customers never reach merchant tools, whatever they type: the choice is made here from the
//! stored sender, not from anything in the message.

use std::sync::Arc;

use async_trait::async_trait;

use crate::jobs::{Turn, TurnHandler};
use crate::store::{JobKind, Store, TenantStore};

/// Clicks to `clicks`, turns to `turns`.
pub struct ByKind {
    pub clicks: Arc<dyn TurnHandler>,
    pub turns: Arc<dyn TurnHandler>,
}

#[async_trait]
impl TurnHandler for ByKind {
    async fn handle(&self, turn: &Turn) -> anyhow::Result<()> {
        match turn.kind {
            JobKind::Click => self.clicks.handle(turn).await,
            JobKind::Turn => self.turns.handle(turn).await,
        }
    }
}

/// Staff to `merchant`, everyone else to `customer`.
pub struct ByAudience {
    pub store: Store,
    pub customer: Arc<dyn TurnHandler>,
    pub merchant: Arc<dyn TurnHandler>,
}

#[async_trait]
impl TurnHandler for ByAudience {
    async fn handle(&self, turn: &Turn) -> anyhow::Result<()> {
        if self.store.is_staff(turn.tenant.id, turn.contact.wa_id.as_ref()).await? {
            self.merchant.handle(turn).await
        } else {
            self.customer.handle(turn).await
        }
    }
}
