//! Which gateway serves a tenant, built once per tenant and settings and reused, so what a
//! gateway keeps between calls (an OAuth token, its mutual-TLS client) is shared by every
//! charge of that tenant.
//!
//! Secrets come through [`Secrets`] (`super::secrets`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::gateway::{GatewayError, PixGateway};
use super::sandbox::SandboxGateway;
use super::secrets::Secrets;
use super::settings::{GatewayKind, PixSettings};
use super::{asaas, bacen, mercadopago};
use crate::domain::TenantId;

type Entry = (PixSettings, Arc<dyn PixGateway>);

/// Bounds memory: one entry per tenant that charged, so a deployment with more tenants than
/// this (or tenants removed over a long uptime) evicts one entry per new tenant instead of
/// growing. An evicted gateway is rebuilt on its next charge (a new token, a new client).
const MAX_ENTRIES: usize = 10_000;

/// The gateways of every tenant, built on first use and rebuilt when the settings change.
pub struct Gateways {
    secrets: Arc<dyn Secrets>,
    built: Mutex<HashMap<TenantId, Entry>>,
}

impl Gateways {
    pub fn new(secrets: Arc<dyn Secrets>) -> Self {
        Self { secrets, built: Mutex::default() }
    }

    /// The gateway for `tenant` with `settings`.
    pub fn for_tenant(&self, tenant: TenantId, settings: &PixSettings) -> Result<Arc<dyn PixGateway>, GatewayError> {
        if let Some((known, gateway)) = self.lock().get(&tenant)
            && known == settings
        {
            return Ok(gateway.clone());
        }
        let built = build(settings, self.secrets.as_ref())?;
        // Another caller may have built one meanwhile: keep the first, so every caller shares
        // one token and one client.
        let mut entries = self.lock();
        match entries.get(&tenant) {
            Some((known, gateway)) if known == settings => Ok(gateway.clone()),
            _ => {
                if entries.len() >= MAX_ENTRIES
                    && !entries.contains_key(&tenant)
                    && let Some(evicted) = entries.keys().next().copied()
                {
                    entries.remove(&evicted);
                }
                entries.insert(tenant, (settings.clone(), built.clone()));
                Ok(built)
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<TenantId, Entry>> {
        // Nothing a panic could leave half-written: a map of finished entries.
        self.built.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Builds the gateway `settings` name.
pub fn build(settings: &PixSettings, secrets: &dyn Secrets) -> Result<Arc<dyn PixGateway>, GatewayError> {
    Ok(match settings.gateway {
        GatewayKind::Sandbox => Arc::new(SandboxGateway::new(settings.clone())),
        GatewayKind::Bacen => Arc::new(bacen::BacenGateway::new(settings, secrets)?),
        GatewayKind::Asaas => Arc::new(asaas::AsaasGateway::new(settings, secrets)?),
        GatewayKind::MercadoPago => Arc::new(mercadopago::MercadoPagoGateway::new(settings, secrets)?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pix::settings::RawPix;

    fn sandbox() -> PixSettings {
        PixSettings::from_raw(RawPix {
            key: "loja@example.com".into(),
            key_type: "email".into(),
            merchant_name: "Loja".into(),
            merchant_city: "Recife".into(),
            ..RawPix::default()
        })
        .expect("settings")
    }

    #[test]
    fn the_cache_stays_bounded_with_tenants() {
        let gateways = Gateways::new(Arc::new(crate::pix::MapSecrets::default()));
        let settings = sandbox();
        for tenant in 0..MAX_ENTRIES as i64 + 50 {
            gateways.for_tenant(TenantId(tenant), &settings).expect("gateway");
        }
        assert_eq!(gateways.lock().len(), MAX_ENTRIES);
        // A cached tenant is still served the same gateway.
        let kept = *gateways.lock().keys().next().expect("an entry");
        let first = gateways.for_tenant(kept, &settings).expect("gateway");
        let again = gateways.for_tenant(kept, &settings).expect("gateway");
        assert!(Arc::ptr_eq(&first, &again));
    }
}
