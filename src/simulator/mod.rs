//! The simulators' shared ground: what `balcao chat` (the terminal) and `/simulator` (the web
//! page, `crate::http`) need to play a customer without a WhatsApp account.
//!
//! Invariant: both build the webhook payload Meta would send with [`payload`], one builder, so
//! a message from either simulator goes through the same intake as WhatsApp's own.

pub mod payload;
