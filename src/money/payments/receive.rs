//! `POST /webhooks/pix/{tenant}/{provider}`: authenticate, store each event once, answer.

use chrono::Utc;

use crate::pix::{Gateways, NotificationError, NotifiedCharge, PixSettings, WebhookRequest};
use crate::store::{NewPaymentEvent, PaymentStore, Store, StoreError, TenantStore};

#[derive(Debug, thiserror::Error)]
pub enum ReceiveError {
    /// No such tenant, or it does not use this provider: nothing to say to the caller.
    #[error("no tenant {0:?} with that Pix provider")]
    UnknownTenant(String),
    #[error("the notification is not authentic")]
    Unauthenticated,
    #[error("the notification is malformed: {0}")]
    Malformed(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Stores the events of an authentic notification; returns how many were new.
pub async fn receive(
    store: &Store,
    gateways: &Gateways,
    slug: &str,
    provider: &str,
    request: &WebhookRequest<'_>,
) -> Result<usize, ReceiveError> {
    let unknown = || ReceiveError::UnknownTenant(slug.to_owned());
    let tenant = store.tenant_by_slug(slug).await?.ok_or_else(unknown)?;
    let raw = tenant.settings.pix.clone().ok_or_else(unknown)?;
    let settings = PixSettings::from_raw(raw).map_err(|_| unknown())?;
    if settings.gateway.as_str() != provider {
        return Err(unknown());
    }
    let gateway = gateways.for_tenant(tenant.id, &settings).map_err(|e| {
        tracing::error!(tenant = %tenant.id, error = %e, "cannot build the Pix gateway for a notification");
        unknown()
    })?;
    let events = gateway.notifications(request).map_err(|e| match e {
        NotificationError::Unauthenticated => ReceiveError::Unauthenticated,
        NotificationError::Malformed(why) => ReceiveError::Malformed(why),
        NotificationError::Unsupported => unknown(),
    })?;
    let now = store.db_time(Utc::now());
    let mut new = 0;
    for event in &events {
        let (ref_kind, charge_ref) = match &event.charge {
            NotifiedCharge::Txid(txid) => ("txid", txid.as_str()),
            NotifiedCharge::ProviderRef(id) => ("provider_ref", id.as_str()),
        };
        let stored = NewPaymentEvent { tenant: tenant.id, provider, event_id: &event.event_id, ref_kind, charge_ref };
        if store.record_payment_event(&stored, now).await? {
            new += 1;
        }
    }
    tracing::info!(tenant = %tenant.id, provider, events = events.len(), new, "payment notification stored");
    Ok(new)
}
