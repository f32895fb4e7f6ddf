//! One integration test binary (one link step): storage contract cases run on SQLite and on
//! PostgreSQL, the HTTP edge against a real server on port 0, and outside APIs against
//! loopback fakes that speak the documented wire formats.

mod support;

mod actions;
mod actions_model;
mod agent;
mod booking;
mod brcode;
mod chat;
mod cli;
mod concurrency;
pub mod console;
mod console_agenda;
mod console_conversations;
mod console_operations;
mod deposits;
mod edge_load;
mod erasure;
mod group_commit;
mod guided;
mod handoff;
mod hardening;
mod jobs;
mod layers;
mod ledger;
mod llm;
mod local_mode;
mod message_kinds;
mod metrics;
mod model_cost;
mod ninth_digit;
mod outbound_kinds;
mod outbox;
mod payer_documents;
mod payments;
mod pipeline;
mod pix_psp;
mod privacy;
mod refunds;
mod refunds_at_asaas;
mod reminders;
mod simulator_page;
mod tenants;
mod turn_end;
mod units;
mod voice;
mod webhook;
mod withdrawals;
