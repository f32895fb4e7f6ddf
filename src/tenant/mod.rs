//! Tenants: the businesses served by one server, declared in TOML files and applied with
//! `balcao tenant apply FILE.toml`.

mod file;
mod settings;
mod staff;

pub use file::{TenantFileError, TenantSpec};
pub use settings::{BusinessAddress, DEFAULT_HOURS_BEFORE, Pin, ReminderSettings, TemplateRef, TenantSettings};
pub use staff::Staff;

use chrono_tz::Tz;

use crate::booking::BookingSettings;
use crate::domain::{Secret, TenantId};

#[derive(Debug, Clone)]
pub struct Tenant {
    pub id: TenantId,
    pub slug: String,
    pub name: String,
    pub timezone: Tz,
    pub phone_number_id: String,
    /// Overrides `WHATSAPP_ACCESS_TOKEN` for this tenant's number.
    pub access_token: Option<Secret>,
    pub booking: BookingSettings,
    pub settings: TenantSettings,
}

/// What applying a tenant file did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApplyOutcome {
    Created(TenantId),
    Updated(TenantId),
    Unchanged(TenantId),
}

impl ApplyOutcome {
    pub fn id(self) -> TenantId {
        match self {
            Self::Created(id) | Self::Updated(id) | Self::Unchanged(id) => id,
        }
    }
}
