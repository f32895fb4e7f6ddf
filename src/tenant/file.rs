//! The declarative tenant file. Parsing checks everything a running server would otherwise
//! discover later (time zone, phone numbers, slug) and reports the line and the reason.
//!
//! A service's `deposit` is an amount (`"20.00"`) or a percentage of its price (`"30%"`,
//! rounded half up to the cent); either way it is stored in cents, more than zero and at most
//! the price, and a file with a deposit must say where it is paid (`[pix]`).

use std::collections::BTreeSet;

use chrono_tz::Tz;
use serde::Deserialize;
use toml::Spanned;

use crate::booking::catalog::DAYS;
use crate::booking::{BookingSettings, CatalogSpec, ProfessionalSpec, ServiceSpec, WeeklyHours};
use crate::domain::{Cents, PhoneE164, Secret};
use crate::pix::{PixSettings, RawPix};
use crate::tenant::{BusinessAddress, Pin, ReminderSettings, TemplateRef, TenantSettings};

/// A validated tenant file.
#[derive(Debug, Clone)]
pub struct TenantSpec {
    pub slug: String,
    pub name: String,
    pub timezone: Tz,
    pub phone_number_id: String,
    pub access_token: Option<Secret>,
    /// Numbers allowed to confirm merchant actions.
    pub staff: BTreeSet<PhoneE164>,
    pub catalog: CatalogSpec,
    pub settings: TenantSettings,
}

#[derive(Debug, thiserror::Error)]
pub enum TenantFileError {
    #[error("{0}")]
    Syntax(String),
    #[error("line {line}: {reason}")]
    Invalid { line: usize, reason: String },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    name: Spanned<String>,
    slug: Spanned<String>,
    timezone: Spanned<String>,
    whatsapp: RawWhatsApp,
    #[serde(default)]
    staff: Vec<Spanned<String>>,
    #[serde(default)]
    booking: RawBooking,
    #[serde(default)]
    services: Vec<RawService>,
    #[serde(default)]
    professionals: Vec<RawProfessional>,
    pix: Option<Spanned<RawPix>>,
    #[serde(default)]
    reminders: ReminderSettings,
    address: Option<Spanned<RawAddress>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAddress {
    text: String,
    latitude: Option<f64>,
    longitude: Option<f64>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawBooking {
    min_notice_minutes: Option<u32>,
    horizon_days: Option<u32>,
    slot_step_minutes: Option<u32>,
    deposit_minutes: Option<u32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawService {
    name: Spanned<String>,
    duration_minutes: Spanned<u32>,
    price: Spanned<String>,
    #[serde(default)]
    buffer_minutes: u32,
    deposit: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProfessional {
    name: Spanned<String>,
    services: Vec<Spanned<String>>,
    #[serde(default)]
    hours: std::collections::BTreeMap<Spanned<String>, Vec<Spanned<String>>>,
    #[serde(default)]
    time_off: Vec<RawTimeOff>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTimeOff {
    from: Spanned<String>,
    to: Spanned<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWhatsApp {
    phone_number_id: Spanned<String>,
    access_token: Option<String>,
    #[serde(default)]
    payments: bool,
    charge_template: Option<TemplateRef>,
}

impl TenantSpec {
    pub fn parse(text: &str) -> Result<Self, TenantFileError> {
        let raw: RawFile = toml::from_str(text).map_err(|e| TenantFileError::Syntax(e.to_string()))?;
        let invalid = |span: std::ops::Range<usize>, reason: String| TenantFileError::Invalid {
            line: line_of(text, span.start),
            reason,
        };

        let name = raw.name.get_ref().trim().to_owned();
        if name.is_empty() {
            return Err(invalid(raw.name.span(), "name must not be empty".into()));
        }
        let slug = raw.slug.get_ref().clone();
        let slug_ok = !slug.is_empty()
            && slug.len() <= 64
            && slug.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !slug.starts_with('-');
        if !slug_ok {
            return Err(invalid(
                raw.slug.span(),
                format!("slug {slug:?} must be 1-64 lowercase letters, digits or '-'"),
            ));
        }
        let timezone: Tz = raw.timezone.get_ref().parse().map_err(|_| {
            invalid(
                raw.timezone.span(),
                format!("timezone {:?} is not an IANA time zone such as America/Sao_Paulo", raw.timezone.get_ref()),
            )
        })?;
        let phone_number_id = raw.whatsapp.phone_number_id.get_ref().clone();
        if phone_number_id.is_empty() || !phone_number_id.bytes().all(|b| b.is_ascii_digit()) {
            return Err(invalid(
                raw.whatsapp.phone_number_id.span(),
                format!(
                    "whatsapp.phone_number_id {phone_number_id:?} must be the numeric id Meta shows for the number"
                ),
            ));
        }
        let mut staff = BTreeSet::new();
        for entry in &raw.staff {
            let phone = PhoneE164::parse(entry.get_ref()).map_err(|e| invalid(entry.span(), format!("staff: {e}")))?;
            staff.insert(phone);
        }
        let catalog = parse_catalog(&raw, &invalid)?;
        if let Some(with_deposit) = raw.services.iter().find_map(|s| s.deposit.as_ref())
            && raw.pix.is_none()
        {
            return Err(invalid(with_deposit.span(), "a deposit is paid by Pix: add the [pix] section".into()));
        }
        let pix = match &raw.pix {
            None => None,
            Some(pix) => {
                PixSettings::from_raw(pix.get_ref().clone()).map_err(|e| invalid(pix.span(), format!("pix: {e}")))?;
                Some(pix.get_ref().clone())
            }
        };
        for template in raw.whatsapp.charge_template.iter().chain(&raw.reminders.template) {
            let ok = !template.name.is_empty()
                && template.name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
            if !ok {
                return Err(invalid(
                    raw.whatsapp.phone_number_id.span(),
                    format!("template name {:?} must be lowercase letters, digits and '_'", template.name),
                ));
            }
        }
        if raw.reminders.hours_before > 24 * 14 {
            return Err(invalid(raw.name.span(), "reminders.hours_before must be at most 336 (14 days)".into()));
        }
        let address = match &raw.address {
            None => None,
            Some(a) => Some(parse_address(a.get_ref()).map_err(|e| invalid(a.span(), format!("address: {e}")))?),
        };
        let settings = TenantSettings {
            pix,
            payments: raw.whatsapp.payments,
            charge_template: raw.whatsapp.charge_template.clone(),
            reminders: raw.reminders.clone(),
            address,
        };
        Ok(Self {
            slug,
            name,
            timezone,
            phone_number_id,
            access_token: raw.whatsapp.access_token.filter(|t| !t.trim().is_empty()).map(Secret::new),
            staff,
            catalog,
            settings,
        })
    }
}

/// The street address customers read and, both or neither, the coordinates of its pin.
fn parse_address(raw: &RawAddress) -> Result<BusinessAddress, String> {
    let text = raw.text.trim();
    if text.is_empty() || text.chars().count() > ADDRESS_MAX_CHARS {
        return Err(format!("text must be 1-{ADDRESS_MAX_CHARS} characters"));
    }
    let pin = match (raw.latitude, raw.longitude) {
        (Some(latitude), Some(longitude)) => Some(Pin::new(latitude, longitude)?),
        (None, None) => None,
        _ => return Err("give both latitude and longitude, or neither".into()),
    };
    Ok(BusinessAddress { text: text.to_owned(), pin })
}

/// Long enough for any street address; short enough for a WhatsApp text with the business's name.
const ADDRESS_MAX_CHARS: usize = 300;

fn parse_catalog(
    raw: &RawFile,
    invalid: &impl Fn(std::ops::Range<usize>, String) -> TenantFileError,
) -> Result<CatalogSpec, TenantFileError> {
    let defaults = BookingSettings::default();
    let settings = BookingSettings {
        min_notice_minutes: raw.booking.min_notice_minutes.unwrap_or(defaults.min_notice_minutes),
        horizon_days: raw.booking.horizon_days.unwrap_or(defaults.horizon_days),
        slot_step_minutes: raw.booking.slot_step_minutes.unwrap_or(defaults.slot_step_minutes),
        deposit_minutes: raw.booking.deposit_minutes.unwrap_or(defaults.deposit_minutes),
    };
    // Whole-file checks: serde spans are not kept for these small integers.
    let limits = [
        (settings.min_notice_minutes <= 60 * 24 * 30, "booking.min_notice_minutes must be at most 43200 (30 days)"),
        ((1..=366).contains(&settings.horizon_days), "booking.horizon_days must be between 1 and 366"),
        ((5..=24 * 60).contains(&settings.slot_step_minutes), "booking.slot_step_minutes must be between 5 and 1440"),
        ((5..=24 * 60).contains(&settings.deposit_minutes), "booking.deposit_minutes must be between 5 and 1440"),
    ];
    if let Some((_, reason)) = limits.iter().find(|(ok, _)| !ok) {
        return Err(invalid(raw.name.span(), (*reason).to_owned()));
    }
    let mut services: Vec<ServiceSpec> = Vec::new();
    for s in &raw.services {
        let name = s.name.get_ref().trim().to_owned();
        if name.is_empty() || services.iter().any(|o| o.name == name) {
            return Err(invalid(s.name.span(), format!("service name {name:?} is empty or repeated")));
        }
        if !(5..=24 * 60).contains(s.duration_minutes.get_ref()) {
            return Err(invalid(s.duration_minutes.span(), "duration_minutes must be between 5 and 1440".into()));
        }
        let price = Cents::parse_decimal(s.price.get_ref()).map_err(|e| invalid(s.price.span(), e.to_string()))?;
        let deposit = match &s.deposit {
            None => Cents(0),
            Some(raw) => {
                ServiceSpec::parse_deposit(raw.get_ref(), price).map_err(|reason| invalid(raw.span(), reason))?
            }
        };
        services.push(ServiceSpec {
            name,
            duration_minutes: *s.duration_minutes.get_ref(),
            buffer_minutes: s.buffer_minutes,
            price,
            deposit,
        });
    }
    let mut professionals: Vec<ProfessionalSpec> = Vec::new();
    for p in &raw.professionals {
        let name = p.name.get_ref().trim().to_owned();
        if name.is_empty() || professionals.iter().any(|o| o.name == name) {
            return Err(invalid(p.name.span(), format!("professional name {name:?} is empty or repeated")));
        }
        let mut offered = Vec::new();
        for service in &p.services {
            if !services.iter().any(|s| &s.name == service.get_ref()) {
                return Err(invalid(service.span(), format!("{:?} is not a service of this file", service.get_ref())));
            }
            offered.push(service.get_ref().clone());
        }
        let mut hours = WeeklyHours::default();
        for (day, ranges) in &p.hours {
            let weekday = DAYS
                .iter()
                .find(|(n, _)| n == day.get_ref())
                .ok_or_else(|| {
                    invalid(day.span(), format!("{:?} is not a day (mon, tue, wed, thu, fri, sat, sun)", day.get_ref()))
                })?
                .1;
            let parsed = ranges
                .iter()
                .map(|r| WeeklyHours::parse_range(r.get_ref()).map_err(|e| invalid(r.span(), e)))
                .collect::<Result<Vec<_>, _>>()?;
            hours.set_day(weekday, parsed).map_err(|e| invalid(day.span(), e))?;
        }
        let mut time_off = Vec::new();
        for off in &p.time_off {
            let at = |v: &Spanned<String>| {
                chrono::NaiveDateTime::parse_from_str(v.get_ref(), "%Y-%m-%dT%H:%M").map_err(|_| {
                    invalid(v.span(), format!("{:?} is not a local date-time YYYY-MM-DDTHH:MM", v.get_ref()))
                })
            };
            let (from, to) = (at(&off.from)?, at(&off.to)?);
            if from >= to {
                return Err(invalid(off.from.span(), "time_off ends before it starts".into()));
            }
            time_off.push((from, to));
        }
        professionals.push(ProfessionalSpec { name, services: offered, hours, time_off });
    }
    Ok(CatalogSpec { settings, services, professionals })
}

fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes().iter().take(offset).filter(|&&b| b == b'\n').count() + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
name = "Barbearia do Zé"
slug = "barbearia-do-ze"
timezone = "America/Sao_Paulo"
staff = ["+5511988887777"]

[whatsapp]
phone_number_id = "106540352242922"
"#;

    #[test]
    fn parses_the_example_shape() {
        let spec = TenantSpec::parse(GOOD).unwrap();
        assert_eq!(spec.slug, "barbearia-do-ze");
        assert_eq!(spec.timezone, chrono_tz::America::Sao_Paulo);
        assert_eq!(spec.staff.len(), 1);
        assert!(spec.access_token.is_none());
    }

    #[test]
    fn the_committed_example_file_parses() {
        let text = include_str!("../../tenants/example.toml");
        TenantSpec::parse(text).unwrap();
    }

    #[test]
    fn reports_line_and_reason() {
        let bad = GOOD.replace("America/Sao_Paulo", "America/Atlantis");
        let err = TenantSpec::parse(&bad).unwrap_err().to_string();
        assert!(err.starts_with("line 4:"), "{err}");
        assert!(err.contains("America/Atlantis"), "{err}");

        let bad = GOOD.replace("+5511988887777", "11 98888-7777");
        let err = TenantSpec::parse(&bad).unwrap_err().to_string();
        assert!(err.starts_with("line 5: staff:"), "{err}");

        let err = TenantSpec::parse("name = \"x\"\nslug = \n").unwrap_err().to_string();
        assert!(err.contains("line 2"), "{err}");

        let bad = GOOD.replace("staff", "staf");
        assert!(TenantSpec::parse(&bad).unwrap_err().to_string().contains("staf"));
    }

    /// [`GOOD`] with [pix], a 50.00 service whose deposit line (line 18) says `deposit`.
    fn with_deposit(deposit: &str) -> String {
        format!(
            "{GOOD}[pix]\nkey = \"caixa@example.com\"\nkey_type = \"email\"\nmerchant_name = \"Zé\"\n\
             merchant_city = \"São Paulo\"\n[[services]]\nname = \"Corte\"\nduration_minutes = 30\n\
             price = \"50.00\"\ndeposit = {deposit}\n"
        )
    }

    #[test]
    fn a_deposit_is_parsed_into_the_service() {
        let spec = TenantSpec::parse(&with_deposit("\"30%\"")).unwrap();
        assert_eq!(spec.catalog.services[0].deposit, Cents(1500));
        assert_eq!(spec.catalog.settings.deposit_minutes, 30, "the default hold");
    }

    #[test]
    fn a_bad_deposit_is_refused_with_its_line() {
        for (raw, reason) in [
            ("\"60.00\"", "more than the price"),
            ("\"0\"", "more than zero"),
            ("\"0%\"", "percentage"),
            ("\"120%\"", "percentage"),
            ("\"-5\"", "deposit"),
            ("\"vinte\"", "deposit"),
        ] {
            let err = TenantSpec::parse(&with_deposit(raw)).unwrap_err().to_string();
            assert!(err.starts_with("line 18:") && err.contains(reason), "{raw}: {err}");
        }
        // A number, not a string: the TOML type is wrong.
        assert!(TenantSpec::parse(&with_deposit("20")).is_err());
        // A deposit needs somewhere to be paid.
        let without_pix = with_deposit("\"10\"").replace("[pix]", "[reminders]").replace("key = \"caixa@example.com\"\nkey_type = \"email\"\nmerchant_name = \"Zé\"\nmerchant_city = \"São Paulo\"\n", "");
        let err = TenantSpec::parse(&without_pix).unwrap_err().to_string();
        assert!(err.contains("[pix]"), "{err}");
        let long_hold = with_deposit("\"10\"").replace("[whatsapp]", "[booking]\ndeposit_minutes = 2000\n[whatsapp]");
        let err = TenantSpec::parse(&long_hold).unwrap_err().to_string();
        assert!(err.contains("deposit_minutes"), "{err}");
    }
}
