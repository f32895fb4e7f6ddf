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
//! - every side effect runs through the idempotent executor under a key derived from business
//!   identity, its outcome stored and replayed ([`ledger`]);
//! - every reply is an outbox row with a key derived from the turn, written before anything is
//!   sent, so a retried turn cannot send twice ([`outbox`]);
//! - every query is scoped by tenant ([`store`]).
//!
//! # Layers, floor to top
//!
//! A module imports only from its own layer (without a cycle) or from the layers below it;
//! the store alone may name a record type of a feature above it, which it persists and never
//! calls. `tests/api/layers.rs` reads every `crate::` path in `src/` and fails on anything else.
//!
//! 1. `domain`: values with no I/O: ids, click ids, money, phones, secrets, keys, time helpers.
//! 2. `messages`, `supervise`: the bot's pt-BR words (templates); background tasks restarted.
//! 3. `llm`, `metrics`, `whatsapp`, `simulator`, `pix`, `booking`, `transcription`: the outside
//!    world's clients and wire formats (models, Meta, Pix providers, BR Codes, speech to text),
//!    the metrics registry, and the booking rules (catalog, hours, slots) with no I/O.
//! 4. `config`, `telemetry`, `tenant`: settings and tenant files, parsed and checked; logging.
//! 5. `store`: SQLite and PostgreSQL behind traits per aggregate, and the rows they keep.
//! 6. `ledger`: the idempotent executor: keys, normalization, outcomes, leases, fencing.
//! 7. `outbox`, `inbound`, `jobs`: the sender; webhook rows and their jobs in one
//!    transaction; the turn queue and its workers.
//! 8. `appointments`, `privacy`: create, move and cancel a booking, as ledger handlers; LGPD
//!    export and erasure.
//! 9. `money`: Pix charges, deposits and payment notifications.
//! 10. `actions`: pending actions: propose, decide with one conditional update, execute.
//! 11. `agent`, `reminders`: the model's side (prompt, tools, guided menus); reminder sweeps.
//! 12. `turns`: what happens to a claimed turn: dispatch, opt-out, handoff, the chain.
//! 13. `http`: the axum edge: webhooks, health, metrics, simulator, the merchant console.
//! 14. `app`: wiring: builds everything from a config and a store, and runs it.
//!
//! Two places differ from the first sketch of this order, on purpose: the ledger sits above the
//! store, because its executor runs on the store while the store only keeps the ledger's rows;
//! and actions sit above money and appointments, because a confirmed action runs a charge or a
//! booking, while neither needs to know that a person confirmed it with a button.

pub mod domain;

pub mod messages;
pub mod supervise;

pub mod booking;
pub mod llm;
pub mod metrics;
pub mod pix;
pub mod simulator;
pub mod transcription;
pub mod whatsapp;

pub mod config;
pub mod telemetry;
pub mod tenant;

pub mod store;

pub mod ledger;

pub mod inbound;
pub mod jobs;
pub mod outbox;

pub mod appointments;
pub mod privacy;

pub mod money;

pub mod actions;

pub mod agent;
pub mod reminders;

pub mod turns;

pub mod http;

pub mod app;
