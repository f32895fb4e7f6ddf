//! The agent's side of the boundary: the tools it may call. Read tools run directly; write
//! tools run through the idempotent executor (`crate::ledger`).

mod guided;
mod merchant_menu;
mod runner;
mod stale_reads;
pub mod tools;

pub use guided::GuidedTurn;
pub use merchant_menu::MerchantMenu;
pub use runner::{AgentSettings, AgentTurn, Audience};
