//! Every helper the API tests share; no test file imports another's. The harness (a database
//! per backend, the app on port 0, `contract!`), the loopback fakes of the outside APIs (Graph,
//! the model, Asaas, Mercado Pago), and builders for what those APIs send.

pub mod agent;
pub mod clicks;
pub mod common;
pub mod console;
pub mod fake_asaas;
pub mod fake_graph;
pub mod fake_mercadopago;
pub mod fake_model;
pub mod fake_transcription;
pub mod loopback;
pub mod payloads;
pub mod queue;
pub mod scenario;
