//! Domain newtypes: values that checked themselves when they were built.

mod ids;
mod money;
mod phone;
mod secret;

pub use ids::{ContactId, ConversationId, JobId, OutboundId, TenantId};
pub use money::{Cents, MoneyError};
pub use phone::{PhoneE164, PhoneError};
pub use secret::{DatabaseUrl, Secret};
