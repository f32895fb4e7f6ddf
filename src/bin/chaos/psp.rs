//! The Pix provider: the API tests' loopback Asaas (`tests/api/support`), shared as it is, so
//! the campaign and the tests hold one fake to the documented wire format.
#![allow(dead_code)]

#[path = "../../../tests/api/support/loopback.rs"]
mod loopback;

#[path = "../../../tests/api/support/fake_asaas.rs"]
pub mod fake_asaas;
