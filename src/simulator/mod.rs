//! Playing a customer without a WhatsApp account: `balcao chat` (the terminal, [`chat`]) and
//! the webhook payloads it and `/simulator` (the web page, `crate::http`) post.
//!
//! Invariant: both build the webhook payload Meta would send with [`payload`], one builder, so
//! a message from either simulator goes through the same intake as WhatsApp's own.

pub mod chat;
pub mod payload;
