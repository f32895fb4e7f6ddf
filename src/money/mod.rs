//! Money: Pix charges (created once a merchant's confirmed charge action or a booking's deposit
//! runs, delivered to the customer, marked paid once), booking deposits, and the payment
//! notifications and poller that turn a payment at the provider into a paid charge here.
//!
//! The gateways themselves (BR Codes, txids, the providers' HTTP APIs) are `crate::pix`'s; this
//! layer is what Balcão does with them, under the ledger's keys.

pub mod charges;
pub mod deposits;
pub mod payments;
pub mod refunds;
