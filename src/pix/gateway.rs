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
//! - a gateway whose provider does not deduplicate creates (Asaas) sends one only while
//!   [`ChargeRequest::window`] is open, and says how long a create sent may take to land
//!   ([`PixGateway::late_create_window`]), so an attempt that took over from a frozen worker,
//!   or from one whose create timed out, waits that out before its lookup (`domain::window`
//!   has the reasoning);
//! - `copia_e_cola` is the provider's payload, stored and sent as is; it is checked with
//!   [`super::brcode::decode`] but never "fixed";
//! - `refund` gives a payment back (see [`super::refund`]): idempotent per
//!   [`RefundRequest::id`], looked up with `find_refund` after an unknown outcome;
//! - `cancel` never hides a payment: when the provider refuses it, the charge's state is asked,
//!   and a charge paid meanwhile comes back as [`CancelOutcome::Paid`] for the paid path.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::refund::RefundId;
use super::txid::Txid;
use crate::domain::{Cents, LedgerKey, PayerDocument, PhoneE164, SendWindow};

/// Who pays: providers that keep customers (Asaas) find or create one by phone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Payer {
    pub phone: PhoneE164,
    pub name: Option<String>,
    /// The payer's CPF or CNPJ: required by Asaas, sent to Bacen and Mercado Pago when known.
    pub document: Option<PayerDocument>,
}

#[derive(Debug, Clone)]
pub struct ChargeRequest {
    pub key: LedgerKey,
    pub txid: Txid,
    pub amount: Cents,
    pub description: String,
    pub expires_at: DateTime<Utc>,
    pub payer: Payer,
    /// Open while the caller still holds the key's lease.
    pub window: SendWindow,
}

/// A charge as recorded, to ask its provider about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChargeRef {
    pub txid: String,
    pub provider_ref: Option<String>,
}

/// What the provider says of a charge now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PaymentState {
    Pending,
    /// Paid; `end_to_end_id` is the Pix transaction's id when the provider gives it.
    Paid {
        end_to_end_id: Option<String>,
    },
    Expired,
    Cancelled,
}

/// What a cancellation at the provider found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CancelOutcome {
    /// The charge can no longer be paid (cancelled now, or expired or cancelled before).
    Cancelled,
    /// It was paid first: nothing was cancelled, and the caller takes the paid path.
    Paid { end_to_end_id: Option<String> },
}

/// What a refused cancellation means: the charge's state decides (paid meanwhile, or already
/// gone); a charge still pending keeps the refusal.
pub(crate) async fn after_refused_cancel(
    gateway: &dyn PixGateway,
    charge: &ChargeRef,
    refusal: GatewayError,
) -> Result<CancelOutcome, GatewayError> {
    match gateway.state(charge).await? {
        PaymentState::Paid { end_to_end_id } => Ok(CancelOutcome::Paid { end_to_end_id }),
        PaymentState::Expired | PaymentState::Cancelled => Ok(CancelOutcome::Cancelled),
        PaymentState::Pending => Err(refusal),
    }
}

/// A refund to request, or to ask about.
#[derive(Debug, Clone)]
pub struct RefundRequest {
    /// The charge whose payment is given back.
    pub charge: ChargeRef,
    /// The Pix that paid it, when known (Bacen refunds a Pix by its end-to-end id; a gateway
    /// asks the charge for it when it is missing).
    pub end_to_end_id: Option<String>,
    pub id: RefundId,
    /// The provider's own id for the refund, once it gave one (Mercado Pago's refund id).
    pub provider_ref: Option<String>,
    pub amount: Cents,
    /// Open while the caller still holds the refund's lease.
    pub window: SendWindow,
}

/// Where a refund stands at the provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RefundState {
    /// Accepted, not settled yet: its notification or the poll settles it.
    Processing,
    /// The money went back to the payer.
    Done,
    /// The provider (or the payer's bank) refused it; nothing went back.
    Failed(String),
}

/// What the provider answered about a refund.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefundReceipt {
    pub state: RefundState,
    /// The provider's id for the refund, if it has one.
    pub provider_ref: Option<String>,
}

/// A payment notification as received: the raw body and what authenticates it.
#[derive(Debug, Clone)]
pub struct WebhookRequest<'a> {
    pub headers: &'a reqwest::header::HeaderMap,
    /// The raw query string, if any (Mercado Pago puts `data.id` there too).
    pub query: Option<&'a str>,
    /// The secret path segment of the URL it came to (Bacen callbacks), if any.
    pub path_secret: Option<&'a str>,
    pub body: &'a [u8],
}

/// One event of a notification: its id (for deduplication) and the charge it is about. The
/// state it claims is never trusted: the caller asks [`PixGateway::state`] before acting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notification {
    pub event_id: String,
    pub charge: NotifiedCharge,
}

/// How a notification names its charge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotifiedCharge {
    Txid(String),
    ProviderRef(String),
}

/// Why a notification was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum NotificationError {
    #[error("the notification is not authentic")]
    Unauthenticated,
    #[error("the notification is malformed: {0}")]
    Malformed(String),
    #[error("this gateway receives no notifications")]
    Unsupported,
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
    /// The caller's lease ran out before the create could be sent: nothing was sent.
    #[error("the lease on this charge ran out before its request was sent; nothing was sent")]
    WindowClosed,
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

    /// For a provider that does not deduplicate creates: how long after it was sent a create
    /// may still land (the request's timeout and a margin for a slow provider). `None` (the
    /// default): the provider returns the same charge for a repeated create (a txid, an
    /// idempotency key), so timing is moot.
    fn late_create_window(&self) -> Option<Duration> {
        None
    }

    /// The charge already created for `req`, if any: the lookup before creating again after
    /// an unknown outcome.
    async fn find(&self, req: &ChargeRequest) -> Result<Option<CreatedCharge>, GatewayError>;

    /// The charge's payment state at the provider: the re-fetch before a notification is
    /// trusted, and the poller's question.
    async fn state(&self, charge: &ChargeRef) -> Result<PaymentState, GatewayError>;

    /// Withdraws a charge so it can no longer be paid (idempotent: a charge already cancelled or
    /// expired is [`CancelOutcome::Cancelled`]); one paid first is reported, not cancelled.
    async fn cancel(&self, charge: &ChargeRef) -> Result<CancelOutcome, GatewayError>;

    /// Requests the refund `req` (idempotent per `req.id`: the refund already requested under
    /// that id is returned, never a second one).
    async fn refund(&self, req: &RefundRequest) -> Result<RefundReceipt, GatewayError>;

    /// The refund requested under `req.id`, if the provider has one: the lookup before sending
    /// again after an unknown outcome, and the poll of a refund still processing.
    async fn find_refund(&self, req: &RefundRequest) -> Result<Option<RefundReceipt>, GatewayError>;

    /// Authenticates a payment notification (constant-time where a secret is compared) and
    /// reads its events.
    fn notifications(&self, request: &WebhookRequest<'_>) -> Result<Vec<Notification>, NotificationError> {
        let _ = request;
        Err(NotificationError::Unsupported)
    }
}
