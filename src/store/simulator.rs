//! What the web simulator reads beyond other aggregates: the tenants it may offer when it is
//! open to everyone (local mode) or to the admin token's bearer.

use super::{Store, StoreResult, TenantRef, reading};
use crate::domain::TenantId;

#[allow(async_fn_in_trait)]
pub trait SimulatorStore {
    /// Every tenant, by slug. The one tenant-wide listing: only for callers allowed to see
    /// every tenant (the simulator in local mode, or with the admin token).
    async fn all_tenants(&self) -> StoreResult<Vec<TenantRef>>;
    /// Whether the conversation with `wa_id` (digits) has a turn or click still to run or
    /// running: its answer may still come.
    async fn turn_pending(&self, tenant: TenantId, wa_id: &str) -> StoreResult<bool>;
    /// The last 500 messages `wa_id` (digits) sent, oldest first, each with the last outbound
    /// message of its conversation queued before it arrived (0 if none): where the page shows
    /// it among the replies.
    async fn sent_by(&self, tenant: TenantId, wa_id: &str) -> StoreResult<Vec<SentMessage>>;
}

/// One message a simulated phone sent, placed after outbound row `after`.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct SentMessage {
    pub after: i64,
    pub kind: String,
    pub body: Option<String>,
}

impl SimulatorStore for Store {
    async fn all_tenants(&self) -> StoreResult<Vec<TenantRef>> {
        Ok(reading!(self, pool => {
            sqlx::query_as("SELECT id, slug, name FROM tenants ORDER BY slug").fetch_all(pool).await
        })?)
    }

    async fn turn_pending(&self, tenant: TenantId, wa_id: &str) -> StoreResult<bool> {
        Ok(reading!(self, pool => {
            sqlx::query_scalar(
                "SELECT EXISTS (SELECT 1 FROM jobs j
                   JOIN conversations v ON v.id = j.conversation_id AND v.tenant_id = j.tenant_id
                   JOIN contacts c ON c.id = v.contact_id AND c.tenant_id = v.tenant_id
                  WHERE j.tenant_id = $1 AND c.wa_id = $2 AND j.state IN ('available', 'running', 'retryable'))",
            )
            .bind(tenant.0)
            .bind(wa_id)
            .fetch_one(pool)
            .await
        })?)
    }

    async fn sent_by(&self, tenant: TenantId, wa_id: &str) -> StoreResult<Vec<SentMessage>> {
        Ok(reading!(self, pool => {
            sqlx::query_as(
                "SELECT after, kind, body FROM (
                 SELECT m.id, COALESCE((SELECT MAX(o.id) FROM outbound_messages o
                                  WHERE o.tenant_id = m.tenant_id AND o.conversation_id = m.conversation_id
                                    AND o.created_at <= m.received_at), 0) AS after,
                        m.kind, m.body
                 FROM inbound_messages m
                 JOIN conversations v ON v.id = m.conversation_id AND v.tenant_id = m.tenant_id
                 JOIN contacts c ON c.id = v.contact_id AND c.tenant_id = v.tenant_id
                 WHERE m.tenant_id = $1 AND c.wa_id = $2
                 ORDER BY m.id DESC
                 LIMIT 500) AS latest
                 ORDER BY id",
            )
            .bind(tenant.0)
            .bind(wa_id)
            .fetch_all(pool)
            .await
        })?)
    }
}
