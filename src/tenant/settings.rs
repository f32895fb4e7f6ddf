//! A tenant's settings beyond its identity and catalog: Pix, the WhatsApp templates used
//! outside the 24-hour window, reminders. Stored as one JSON column, read with the tenant.

use serde::{Deserialize, Serialize};

use crate::pix::RawPix;

/// A pre-approved WhatsApp template: the only kind of message Meta delivers to someone who
/// has not written in the last 24 hours.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TemplateRef {
    pub name: String,
    #[serde(default = "default_language")]
    pub language: String,
}

fn default_language() -> String {
    "pt_BR".to_owned()
}

/// Reminders before confirmed appointments.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReminderSettings {
    /// 0 turns reminders off.
    #[serde(default = "default_hours_before")]
    pub hours_before: u32,
    /// Sent when the customer is outside the 24-hour window; its quick replies confirm or
    /// cancel. Without one, such customers get no reminder.
    #[serde(default)]
    pub template: Option<TemplateRef>,
}

/// Reminders a day ahead unless the tenant file says otherwise (also the reminder query's
/// default for tenants stored before settings existed).
pub const DEFAULT_HOURS_BEFORE: u32 = 24;

fn default_hours_before() -> u32 {
    DEFAULT_HOURS_BEFORE
}

impl Default for ReminderSettings {
    fn default() -> Self {
        Self { hours_before: default_hours_before(), template: None }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TenantSettings {
    #[serde(default)]
    pub pix: Option<RawPix>,
    /// Send charges as WhatsApp `order_details` messages (WhatsApp Payments in Brazil).
    #[serde(default)]
    pub payments: bool,
    /// The template a charge goes out as when the customer is outside the 24-hour window:
    /// body parameters amount, description, copia e cola.
    #[serde(default)]
    pub charge_template: Option<TemplateRef>,
    #[serde(default)]
    pub reminders: ReminderSettings,
    /// Where the business is: what a customer asking for the "endereço" gets.
    #[serde(default)]
    pub address: Option<BusinessAddress>,
}

/// The business's street address and, when the tenant file gives them, its coordinates: with
/// them "endereço" is answered with a WhatsApp location pin, without them as text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BusinessAddress {
    pub text: String,
    #[serde(default)]
    pub pin: Option<Pin>,
}

/// A point on the map, in decimal degrees; built only through [`Pin::new`], so always on Earth.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "(f64, f64)", into = "(f64, f64)")]
pub struct Pin {
    latitude: f64,
    longitude: f64,
}

// Finite by construction, so equality is an equivalence.
impl Eq for Pin {}

impl Pin {
    pub fn new(latitude: f64, longitude: f64) -> Result<Self, String> {
        if !(latitude.is_finite() && (-90.0..=90.0).contains(&latitude)) {
            return Err(format!("latitude {latitude} must be between -90 and 90"));
        }
        if !(longitude.is_finite() && (-180.0..=180.0).contains(&longitude)) {
            return Err(format!("longitude {longitude} must be between -180 and 180"));
        }
        Ok(Self { latitude, longitude })
    }

    pub fn latitude(self) -> f64 {
        self.latitude
    }

    pub fn longitude(self) -> f64 {
        self.longitude
    }
}

impl TryFrom<(f64, f64)> for Pin {
    type Error = String;
    fn try_from((latitude, longitude): (f64, f64)) -> Result<Self, String> {
        Self::new(latitude, longitude)
    }
}

impl From<Pin> for (f64, f64) {
    fn from(p: Pin) -> Self {
        (p.latitude, p.longitude)
    }
}

impl TenantSettings {
    /// Whether the tenant's Pix moves no real money: the sandbox gateway, or no Pix at all.
    pub fn pix_is_sandbox(&self) -> bool {
        self.pix.as_ref().is_none_or(|p| p.gateway.as_deref().is_none_or(|g| g == "sandbox"))
    }
}
