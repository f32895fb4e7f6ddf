//! Domain newtypes: values that checked themselves when they were built.

mod ids;
mod phone;

pub use ids::{ContactId, ConversationId, JobId, OutboundId, TenantId};
pub use phone::{PhoneE164, PhoneError};
