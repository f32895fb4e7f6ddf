//! Webhook routing: `phone_number_id` → tenant, cached briefly in memory.
//!
//! Every inbound webhook names its business number; looking it up in the database each time
//! would be one more round trip per message, so a found tenant is cached for [`TTL`].
//!
//! Invariant: "no such tenant" is never cached. A `balcao tenant apply` runs in another
//! process and cannot invalidate this cache, so a remembered miss would drop (acknowledge
//! and discard) the first messages of a number applied a moment ago. Misses cost one indexed
//! read each, and only Meta can make them: the webhook checks the signature first.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::store::{Store, StoreResult, TenantStore};
use crate::tenant::Tenant;

/// How long a found tenant is served from memory: a changed access token or number reaches
/// running servers within this time.
pub const TTL: Duration = Duration::from_secs(5);
/// Bounds memory; only known numbers are stored, so this is far above any real deployment.
const MAX_ENTRIES: usize = 10_000;

#[derive(Default)]
pub struct TenantDirectory {
    entries: Mutex<HashMap<String, (Instant, Tenant)>>,
}

impl TenantDirectory {
    pub async fn by_phone_number_id(&self, store: &Store, phone_number_id: &str) -> StoreResult<Option<Tenant>> {
        if let Some((at, tenant)) = self.lock().get(phone_number_id)
            && at.elapsed() < TTL
        {
            return Ok(Some(tenant.clone()));
        }
        let Some(tenant) = store.tenant_by_phone_number_id(phone_number_id).await? else {
            // A stale positive entry (the number moved away) must not outlive the database.
            self.lock().remove(phone_number_id);
            return Ok(None);
        };
        let mut entries = self.lock();
        if entries.len() >= MAX_ENTRIES {
            entries.retain(|_, (at, _)| at.elapsed() < TTL);
        }
        if entries.len() < MAX_ENTRIES {
            entries.insert(phone_number_id.to_owned(), (Instant::now(), tenant.clone()));
        }
        Ok(Some(tenant))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Instant, Tenant)>> {
        // A panic while holding this lock cannot leave the map inconsistent: use it anyway.
        self.entries.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
