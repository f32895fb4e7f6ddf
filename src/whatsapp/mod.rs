//! WhatsApp Cloud API: webhook signature and payloads, outbound message types and the Graph
//! API client. Hand-rolled on reqwest + serde: the surface is small and the safety-critical
//! parts (raw-body HMAC, open enums, optional identity fields) are ours to own.

pub mod client;
mod inbound;
pub mod media;
pub mod message;
pub mod signature;
pub mod webhook;

pub use client::{GraphClient, SendError};
pub use inbound::{ContactIdentity, InboundContent, MediaKind, NewInbound, stored};
pub use message::{ListRow, ListSection, MessageError, OutboundMessage, Recipient, ReplyButton, UploadedImage};
