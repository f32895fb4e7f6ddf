//! The agent's side of the boundary: the tools it may call. Read tools run directly; write
//! tools run through the idempotent executor (`crate::ledger`).

mod runner;
pub mod tools;

pub use runner::{AgentSettings, AgentTurn};
