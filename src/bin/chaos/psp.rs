//! The Pix provider: the API tests' loopback Asaas (`tests/api/pix_psp`), shared as it is, so
//! the campaign and the tests hold one fake to the documented wire format.
#![allow(dead_code)]

#[path = "../../../tests/api/pix_psp/loopback.rs"]
mod loopback;
pub use loopback::{HANG, Loopback, brcode, locked};

#[path = "../../../tests/api/pix_psp/fake_asaas.rs"]
pub mod fake_asaas;
