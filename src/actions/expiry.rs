//! Expiring proposals nobody answered: each is marked expired and its person told once, in
//! one transaction (the notice's outbox key is the action's), so a crash or two servers
//! sweeping at once never tell anyone twice. A person who opted out of proactive messages
//! (`crate::privacy`) is not told.

use std::time::Duration;

use chrono::Utc;
use tokio_util::sync::CancellationToken;

use super::{ActionKind, PendingAction};
use crate::jobs::Replier;
use crate::messages::{ActionText, action_text};
use crate::store::{ActionStore, ChargeStore, NewOutbound, OutboxKey, Store, TenantStore};
use crate::whatsapp::message::{TEXT_BODY_MAX, clip};
use crate::whatsapp::{OutboundMessage, Recipient};

/// Actions expired per transaction.
const BATCH: i64 = 100;

/// Expires every due action (and every charge past its expiry); returns how many actions.
pub async fn expire_due(store: &Store, replier: &Replier) -> anyhow::Result<usize> {
    let charges = store.expire_charges(store.db_time(Utc::now())).await?;
    if charges > 0 {
        tracing::info!(charges, "charges expired unpaid");
    }
    let mut total = 0;
    let with_token = store.tenants_with_token().await?;
    loop {
        let notice = |action: &PendingAction, recipient: Recipient| -> Option<NewOutbound> {
            // A reminder's buttons lapse when the appointment starts: nothing to tell then.
            if action.kind() == ActionKind::Attendance {
                return None;
            }
            let what = clip(&action.offer_text, 200);
            let text = action_text(ActionText::ExpiredNotice { what: &what }).ok()?;
            Some(NewOutbound {
                tenant: action.tenant,
                conversation: action.conversation,
                key: OutboxKey::parse(&format!("action:{}:expired", action.id.0.simple()))?,
                recipient,
                message: OutboundMessage::Text { body: clip(&text, TEXT_BODY_MAX) },
                local: replier.is_local_for(with_token.contains(&action.tenant)),
                written_by: None,
                unless_handed_off: false,
            })
        };
        let expired = store.expire_actions(store.db_time(Utc::now()), BATCH, &notice).await?;
        total += expired.len();
        for action in &expired {
            tracing::info!(tenant = %action.tenant, action = %action.id, kind = action.kind().as_str(), "action expired");
        }
        if !expired.is_empty() {
            replier.wake();
        }
        if (expired.len() as i64) < BATCH {
            return Ok(total);
        }
    }
}

/// Sweeps every `every` until `stop`.
pub async fn run_expiry(store: Store, replier: Replier, every: Duration, stop: CancellationToken) {
    crate::supervise::periodically("expiring pending actions", every, stop, || expire_due(&store, &replier)).await;
}
