//! The agent's side of the boundary: the tools it may call. Read tools run directly; write
//! tools run through the idempotent executor (`crate::ledger`).

mod guided;
mod runner;
pub mod tools;

pub use guided::GuidedTurn;
pub use runner::{AgentSettings, AgentTurn};
