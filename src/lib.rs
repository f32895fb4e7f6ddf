//! Balcão: a self-hosted WhatsApp receptionist for small businesses.
//!
//! The one idea: the language model, the queue, the network and the customer all repeat
//! themselves, and none of that may produce a second side effect. The guarantees live in the
//! database and in deterministic code at the boundary, never in a prompt:
//!
//! - an inbound WhatsApp message is stored once per provider message id (unique index) and its
//!   turn job is enqueued in the same transaction ([`inbound`]);
//! - a conversation has at most one running turn, and a turn's identity and trigger messages are
//!   fixed at its first claim and stay the same on every retry ([`jobs`]);
//! - every reply is an outbox row with a key derived from the turn, written before anything is
//!   sent, so a retried turn cannot send twice ([`outbox`]);
//! - every query is scoped by tenant ([`store`]).

pub mod actions;
pub mod agent;
pub mod app;
pub mod appointments;
pub mod booking;
pub mod charges;
pub mod chat;
pub mod config;
pub mod console;
pub mod deposits;
pub mod domain;
pub mod handoff;
pub mod http;
pub mod inbound;
pub mod jobs;
pub mod ledger;
pub mod llm;
pub mod messages;
pub mod metrics;
pub mod outbox;
pub mod payments;
pub mod pix;
pub mod privacy;
pub mod reminders;
pub mod simulator;
pub mod store;
pub mod supervise;
pub mod telemetry;
pub mod tenant;
pub mod whatsapp;
