//! The merchant console's read models: the agenda and an appointment's history, the operations
//! pages (charges, failures, catalog), and conversations with their transcript and trace. Reads
//! only, shaped for one page each; the writes a page triggers go through the features.

pub mod agenda;
pub mod conversations;
pub mod operations;
