//! The turn queue's inputs as the intake writes them: timings, inbound messages, a recorded turn.

use balcao::domain::{ConversationId, JobId};
use balcao::store::{InboundStore, JobKind, Recorded, Store, TurnTiming};
use balcao::tenant::Tenant;
use balcao::whatsapp::{ContactIdentity, InboundContent, NewInbound};
use chrono::{DateTime, TimeDelta, Utc};

pub fn timing(debounce_s: i64, cap_s: i64, max_attempts: u32) -> TurnTiming {
    TurnTiming { debounce: TimeDelta::seconds(debounce_s), debounce_max: TimeDelta::seconds(cap_s), max_attempts }
}

pub fn message(wamid: &str, wa_id: &str) -> NewInbound {
    NewInbound {
        provider_message_id: wamid.to_owned(),
        contact: ContactIdentity {
            wa_id: Some(balcao::domain::PhoneE164::parse(wa_id).unwrap()),
            user_id: None,
            username: None,
            profile_name: Some("Ana".into()),
        },
        content: InboundContent::Text { body: format!("msg {wamid}") },
        context_id: None,
        sent_at: None,
        raw: serde_json::json!({ "id": wamid }),
        simulated_by: None,
        sender_hashes: Vec::new(),
    }
}

pub async fn record(
    store: &Store,
    tenant: &Tenant,
    wamid: &str,
    wa_id: &str,
    t: &TurnTiming,
    now: DateTime<Utc>,
) -> (ConversationId, JobId) {
    match store.record_inbound(tenant.id, &message(wamid, wa_id), JobKind::Turn, t, now).await.unwrap() {
        Recorded::New { conversation, job } => (conversation, job),
        other => panic!("{wamid} was not stored: {other:?}"),
    }
}
