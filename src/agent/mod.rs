//! The agent's side of the boundary: the model's turn (prompt, history, the tool loop), the
//! tool registry (thin over `crate::appointments`, `crate::money` and `crate::actions`), and the
//! guided menus that answer without a model. Write tools run through `crate::ledger`.

mod guided;
mod merchant_menu;
mod runner;
mod stale_reads;
pub mod tools;

pub use guided::GuidedTurn;
pub use merchant_menu::MerchantMenu;
pub use runner::{AgentSettings, AgentTurn, Audience};
