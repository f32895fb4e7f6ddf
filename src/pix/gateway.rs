//! The boundary to whoever creates Pix charges (a PSP's API, or the local sandbox).
//!
//! Contract of a [`PixGateway`]:
//! - `create` is idempotent per [`ChargeRequest::key`]: calling it again with the same key
//!   (after a crash, a timeout, a retried job) returns the same charge, never a second one.
//!   The caller derives `txid` deterministically from the key and persists it before the
//!   first call, so a gateway can rely on the txid (Bacen `PUT /cob/{txid}`) or on its own
//!   idempotency mechanism keyed by the ledger key.
//! - After [`GatewayError::Unknown`] (timeout, 5xx, connection reset) the charge may or may
//!   not exist: the caller calls `find` first and calls `create` again only when `find`
//!   returns `None`. A new key or txid is never minted for a retry.
//! - [`GatewayError::Rejected`] is permanent for this request: retrying cannot succeed.
//! - `copia_e_cola` is the provider's payload, stored and sent as is; it is checked with
//!   [`super::brcode::decode`] but never "fixed".

use chrono::{DateTime, Utc};

use super::txid::Txid;
use crate::domain::Cents;
use crate::ledger::LedgerKey;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChargeRequest {
    pub key: LedgerKey,
    pub txid: Txid,
    pub amount: Cents,
    pub description: String,
    pub expires_at: DateTime<Utc>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreatedCharge {
    pub txid: Txid,
    pub copia_e_cola: String,
    /// The provider's own id for the charge, when it has one.
    pub provider_ref: Option<String>,
    pub expires_at: DateTime<Utc>,
}

#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    /// The provider refused the charge; the message can be shown to the merchant.
    #[error("the Pix provider rejected the charge: {0}")]
    Rejected(String),
    /// Timeout, 5xx or a broken connection: the charge may exist. Look it up before creating.
    #[error("the Pix provider's answer is unknown: {0}")]
    Unknown(String),
    /// Credentials or certificate refused.
    #[error("the Pix provider refused our credentials: {0}")]
    Unauthorized(String),
    /// The tenant has no usable Pix settings for this gateway.
    #[error("Pix is not configured: {0}")]
    NotConfigured(String),
}

#[async_trait::async_trait]
pub trait PixGateway: Send + Sync {
    /// A short name for logs and metrics.
    fn name(&self) -> &'static str;

    /// Creates the charge for `req.key`, or returns the one already created for it.
    async fn create(&self, req: &ChargeRequest) -> Result<CreatedCharge, GatewayError>;

    /// The charge already created for `req`, if any: the lookup before creating again after
    /// an unknown outcome.
    async fn find(&self, req: &ChargeRequest) -> Result<Option<CreatedCharge>, GatewayError>;
}
