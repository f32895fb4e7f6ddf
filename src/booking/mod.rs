//! The booking domain: a tenant's catalog (services, professionals, weekly hours, time off),
//! availability in the tenant's time zone, and appointments.
//!
//! Invariants:
//! - instants are stored in UTC; hours and time off are wall-clock times in the tenant's IANA
//!   zone, converted per day (so daylight-saving changes and -02/-03/-04 zones just work);
//! - no two active (`held`, `confirmed`) appointments of one professional overlap, enforced by
//!   the database (PostgreSQL `EXCLUDE`, SQLite trigger under its single writer), never by a
//!   check in Rust alone; a violation is a `SlotTaken` the agent can explain;
//! - an appointment carries the ledger key of the booking call that describes it now (the
//!   create key of its current slot), so a re-run of the same booking finds it instead of
//!   creating another; moving or cancelling it supersedes every ledger row that described it
//!   before, in the same transaction;
//! - a customer's own active appointments do not overlap either, unless a caller allows it
//!   deliberately (a merchant booking by hand); a started appointment is neither moved nor
//!   cancelled;
//! - a service with a deposit is booked `held` with a `hold_expires_at` (never later than its
//!   start) and confirmed only by the deposit's payment; a hold that runs out becomes
//!   `expired`, which the overlap rule does not count (see `crate::money::deposits`).

pub mod availability;
pub(crate) mod catalog;

pub use catalog::{BookingSettings, CatalogSpec, Professional, ProfessionalSpec, Service, ServiceSpec, WeeklyHours};

use chrono::{DateTime, Utc};

use crate::domain::Cents;

/// An appointment as stored.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct Appointment {
    pub id: i64,
    pub contact_id: i64,
    pub service_id: i64,
    pub professional_id: i64,
    pub starts_at: DateTime<Utc>,
    pub ends_at: DateTime<Utc>,
    /// held | confirmed | cancelled | expired
    pub status: String,
    pub price_cents: i64,
    /// The deposit a held appointment waits for, copied from the service at booking (0: none).
    pub deposit_cents: i64,
    /// When a held appointment's hold runs out; none once confirmed.
    pub hold_expires_at: Option<DateTime<Utc>>,
}

impl Appointment {
    pub fn price(&self) -> Cents {
        Cents(self.price_cents)
    }

    pub fn deposit(&self) -> Cents {
        Cents(self.deposit_cents)
    }

    /// Held, waiting for its deposit: the hold's end.
    pub fn awaiting_deposit(&self) -> Option<DateTime<Utc>> {
        self.hold_expires_at.filter(|_| self.status == "held" && self.deposit_cents > 0)
    }
}
