//! Booking deposits: a service may ask for one (an amount or a percentage of its price, in the
//! tenant file). Booking it holds the appointment; the customer gets a Pix charge for the
//! deposit; paying it confirms the appointment; a hold that runs out frees the slot.
//!
//! Invariants:
//! - a held appointment counts for the overlap rule like a confirmed one; an `expired` one
//!   does not, so the slot is free again the moment its hold is expired;
//! - the hold ends `deposit_minutes` after booking, or at the start if that comes first, and
//!   the deposit's charge lapses with it; the deposit is copied onto the appointment at booking
//!   (like its price), so editing the tenant file never changes what a held booking owes;
//! - one charge per appointment: it is created by the ledger tool `create_deposit`, keyed by
//!   the customer and the appointment id, and `charges` has a unique deposit index per
//!   appointment. Booking never waits on a Pix provider: [`DepositRequests::request_due`]
//!   sends the charge for every held appointment without one, every few seconds, and finishes
//!   every `create_deposit` left unsettled, even once its hold has lapsed (a payment the
//!   provider made is then recorded closed and withdrawn);
//! - a payment is one transaction: the charge is paid and its appointment confirmed (held, or
//!   expired while its slot stayed free, and not started) with both notices; when the database
//!   refuses the confirmation (the overlap rule: the slot was taken meanwhile) or the booking
//!   was cancelled, the charge becomes `refund_due` and the merchant (every staff member) is
//!   told to give the money back. Never two active appointments in one slot;
//! - a hold that runs out is one transaction: held → expired (its ledger rows and pending
//!   proposals superseded, so booking the slot again is a new booking), its pending charge
//!   expired, and the customer's notice queued under a key derived from the appointment: told
//!   once, however many sweeps run. The expired (or, with its booking, cancelled) charge is then
//!   withdrawn at its provider (`money::charges::withdraw`); one paid meanwhile is confirmed
//!   through the paid path instead;
//! - on a gateway that needs the payer's CPF or CNPJ (Asaas), a customer without one is asked
//!   for it once (`deposit:{id}:document`) and the charge waits; their answer is taken by
//!   `turns::payer_document` and the next sweep sends the charge.
//!
//! Known limits: a customer known only by a username (no WhatsApp number) cannot be charged,
//! so the hold just runs out.

mod expiry;
mod paid;
mod request;

pub use expiry::{expire_due, run_expiry};
pub(crate) use paid::mark_deposit_paid;
pub use request::{CREATE_DEPOSIT, CreateDeposit, DepositRequests, run_requests};

use crate::booking::Appointment;
use crate::messages::when_at;
use crate::store::{CatalogStore, Store, StoreResult};
use crate::tenant::Tenant;

/// The appointment as customers read it: its service's name and its start.
async fn describe(store: &Store, tenant: &Tenant, appointment: &Appointment) -> StoreResult<(String, String)> {
    let (services, _) = store.catalog(tenant.id).await?;
    let service = services.iter().find(|s| s.id == appointment.service_id).map_or("?", |s| s.name.as_str());
    Ok((service.to_owned(), when_at(tenant.timezone, appointment.starts_at)))
}
