//! The guided menu's place in a multi-step form, per conversation.

use serde_json::Value;
use sqlx::types::Json;

use super::tx::hold_job_lease;
use super::{Dialect, Lease, Store, StoreError, StoreResult, reading, writing};
use crate::domain::{ConversationId, TenantId};

#[allow(async_fn_in_trait)]
pub trait MenuStore {
    async fn menu_state(&self, tenant: TenantId, conversation: ConversationId) -> StoreResult<Option<Value>>;
    /// Sets (or clears) the state while the turn's job `lease` holds, like every turn write.
    async fn set_menu_state(
        &self,
        tenant: TenantId,
        conversation: ConversationId,
        state: Option<&Value>,
        lease: &Lease,
        now: chrono::DateTime<chrono::Utc>,
    ) -> StoreResult<()>;
}

impl MenuStore for Store {
    async fn menu_state(&self, tenant: TenantId, conversation: ConversationId) -> StoreResult<Option<Value>> {
        let state: Option<Option<Json<Value>>> = reading!(self, pool => {
            sqlx::query_scalar("SELECT menu_state FROM conversations WHERE tenant_id = $1 AND id = $2")
                .bind(tenant.0)
                .bind(conversation.0)
                .fetch_optional(pool)
                .await
        })?;
        Ok(state.flatten().map(|s| s.0))
    }

    async fn set_menu_state(
        &self,
        tenant: TenantId,
        conversation: ConversationId,
        state: Option<&Value>,
        lease: &Lease,
        now: chrono::DateTime<chrono::Utc>,
    ) -> StoreResult<()> {
        writing!(self, pool => {
            let mut tx = pool.begin_write().await?;
            if !hold_job_lease!(tx, lease, now)? {
                return Err(StoreError::LeaseLost);
            }
            sqlx::query("UPDATE conversations SET menu_state = $1 WHERE tenant_id = $2 AND id = $3")
                .bind(state.map(Json))
                .bind(tenant.0)
                .bind(conversation.0)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            Ok(())
        })
    }
}
