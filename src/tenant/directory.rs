//! Webhook routing: `phone_number_id` → tenant, cached briefly in memory.
//!
//! Every inbound webhook names its business number; looking it up in the database each time
//! would be one more round trip per message. Entries (including "no such tenant", so a
//! misrouted number cannot hammer the database) live for [`TTL`]: a `balcao tenant apply`
//! reaches running servers within that time.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::Tenant;
use crate::store::{Store, StoreResult, TenantStore};

pub const TTL: Duration = Duration::from_secs(5);
/// Bounds memory if someone sprays random numbers at the webhook.
const MAX_ENTRIES: usize = 10_000;

#[derive(Default)]
pub struct TenantDirectory {
    entries: Mutex<HashMap<String, (Instant, Option<Tenant>)>>,
}

impl TenantDirectory {
    pub async fn by_phone_number_id(&self, store: &Store, phone_number_id: &str) -> StoreResult<Option<Tenant>> {
        if let Some((at, tenant)) = self.lock().get(phone_number_id)
            && at.elapsed() < TTL
        {
            return Ok(tenant.clone());
        }
        let tenant = store.tenant_by_phone_number_id(phone_number_id).await?;
        let mut entries = self.lock();
        if entries.len() >= MAX_ENTRIES {
            entries.retain(|_, (at, _)| at.elapsed() < TTL);
        }
        if entries.len() < MAX_ENTRIES {
            entries.insert(phone_number_id.to_owned(), (Instant::now(), tenant.clone()));
        }
        Ok(tenant)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Instant, Option<Tenant>)>> {
        // A panic while holding this lock cannot leave the map inconsistent: use it anyway.
        self.entries.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
