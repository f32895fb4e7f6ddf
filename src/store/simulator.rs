//! What the web simulator reads beyond other aggregates: the tenants it may offer when it is
//! open to everyone (local mode) or to the admin token's bearer.

use super::{Store, StoreResult, TenantRef, reading};

#[allow(async_fn_in_trait)]
pub trait SimulatorStore {
    /// Every tenant, by slug. The one tenant-wide listing: only for callers allowed to see
    /// every tenant (the simulator in local mode, or with the admin token).
    async fn all_tenants(&self) -> StoreResult<Vec<TenantRef>>;
}

impl SimulatorStore for Store {
    async fn all_tenants(&self) -> StoreResult<Vec<TenantRef>> {
        Ok(reading!(self, pool => {
            sqlx::query_as("SELECT id, slug, name FROM tenants ORDER BY slug").fetch_all(pool).await
        })?)
    }
}
