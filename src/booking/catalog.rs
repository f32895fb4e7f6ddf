//! Catalog types: what a tenant offers and when.

use std::collections::BTreeMap;

use chrono::{NaiveDateTime, NaiveTime, Weekday};
use serde::{Deserialize, Serialize};

use crate::domain::Cents;

pub const DAYS: [(&str, Weekday); 7] = [
    ("mon", Weekday::Mon),
    ("tue", Weekday::Tue),
    ("wed", Weekday::Wed),
    ("thu", Weekday::Thu),
    ("fri", Weekday::Fri),
    ("sat", Weekday::Sat),
    ("sun", Weekday::Sun),
];

/// Working ranges per weekday, in wall-clock time; gaps are breaks.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "BTreeMap<String, Vec<String>>", into = "BTreeMap<String, Vec<String>>")]
pub struct WeeklyHours(pub [Vec<(NaiveTime, NaiveTime)>; 7]);

impl WeeklyHours {
    pub fn on(&self, day: Weekday) -> &[(NaiveTime, NaiveTime)] {
        &self.0[day.num_days_from_monday() as usize]
    }

    /// Parses `"09:00-12:00"`; ranges must be increasing and not overlap.
    pub fn parse_range(raw: &str) -> Result<(NaiveTime, NaiveTime), String> {
        let (a, b) = raw.split_once('-').ok_or_else(|| format!("{raw:?} is not a range like \"09:00-12:00\""))?;
        let parse =
            |t: &str| NaiveTime::parse_from_str(t.trim(), "%H:%M").map_err(|_| format!("{t:?} is not a time HH:MM"));
        let (from, to) = (parse(a)?, parse(b)?);
        if from >= to {
            return Err(format!("{raw:?} ends before it starts"));
        }
        Ok((from, to))
    }

    pub fn set_day(&mut self, day: Weekday, mut ranges: Vec<(NaiveTime, NaiveTime)>) -> Result<(), String> {
        ranges.sort();
        if ranges.windows(2).any(|w| w[0].1 > w[1].0) {
            return Err("ranges of one day overlap".to_owned());
        }
        self.0[day.num_days_from_monday() as usize] = ranges;
        Ok(())
    }
}

impl TryFrom<BTreeMap<String, Vec<String>>> for WeeklyHours {
    type Error = String;
    fn try_from(map: BTreeMap<String, Vec<String>>) -> Result<Self, String> {
        let mut hours = Self::default();
        for (name, ranges) in map {
            let day = DAYS.iter().find(|(n, _)| *n == name).ok_or_else(|| format!("unknown day {name:?}"))?.1;
            let ranges = ranges.iter().map(|r| Self::parse_range(r)).collect::<Result<_, _>>()?;
            hours.set_day(day, ranges)?;
        }
        Ok(hours)
    }
}

impl From<WeeklyHours> for BTreeMap<String, Vec<String>> {
    fn from(hours: WeeklyHours) -> Self {
        DAYS.iter()
            .filter(|(_, d)| !hours.on(*d).is_empty())
            .map(|(name, d)| {
                let ranges = hours.on(*d).iter().map(|(a, b)| format!("{}-{}", a.format("%H:%M"), b.format("%H:%M")));
                ((*name).to_owned(), ranges.collect())
            })
            .collect()
    }
}

/// Booking rules of a tenant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BookingSettings {
    /// How far ahead of now the earliest bookable start is.
    pub min_notice_minutes: u32,
    /// How many days ahead bookings are taken.
    pub horizon_days: u32,
    /// Distance between offered start times.
    pub slot_step_minutes: u32,
    /// How long a booking that asks for a deposit is held waiting for its payment.
    pub deposit_minutes: u32,
}

impl Default for BookingSettings {
    fn default() -> Self {
        Self { min_notice_minutes: 60, horizon_days: 30, slot_step_minutes: 30, deposit_minutes: 30 }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceSpec {
    pub name: String,
    pub duration_minutes: u32,
    pub buffer_minutes: u32,
    pub price: Cents,
    /// Paid by Pix to confirm a booking (0: none), at most the price.
    pub deposit: Cents,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProfessionalSpec {
    pub name: String,
    pub services: Vec<String>,
    pub hours: WeeklyHours,
    /// Wall-clock ranges `[from, to)` in the tenant's zone.
    pub time_off: Vec<(NaiveDateTime, NaiveDateTime)>,
}

/// What a tenant file declares about bookings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CatalogSpec {
    pub settings: BookingSettings,
    pub services: Vec<ServiceSpec>,
    pub professionals: Vec<ProfessionalSpec>,
}

impl ServiceSpec {
    /// `"20.00"` or `"30%"` of `price`, in cents: more than zero and at most the price.
    pub fn parse_deposit(raw: &str, price: Cents) -> Result<Cents, String> {
        let deposit = match raw.trim().strip_suffix('%') {
            Some(percent) => {
                // Parsed like money so "12.5%" reads as 1250 hundredths of a percent.
                let hundredths = Cents::parse_decimal(percent)
                    .ok()
                    .filter(|p| p.0 > 0 && p.0 <= 100 * 100)
                    .ok_or_else(|| format!("deposit {raw:?} must be a percentage between 0% and 100%, like \"30%\""))?;
                // price (≤ 10^9) × hundredths (≤ 10^4) fits in i64; rounded half up to the cent.
                Cents((price.0 * hundredths.0 + 5_000) / 10_000)
            }
            None => Cents::parse_decimal(raw).map_err(|e| format!("deposit: {e}, or a percentage like \"30%\""))?,
        };
        if deposit.0 <= 0 {
            return Err(format!("deposit {raw:?} comes to {deposit}; it must be more than zero"));
        }
        if deposit > price {
            return Err(format!("deposit {raw:?} ({deposit}) is more than the price ({price})"));
        }
        Ok(deposit)
    }
}

/// A service as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Service {
    pub id: i64,
    pub name: String,
    pub duration_minutes: i64,
    pub buffer_minutes: i64,
    pub price: Cents,
    /// 0: booking it confirms at once; otherwise it is held until this is paid.
    pub deposit: Cents,
}

/// A professional as stored, with the services they perform.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Professional {
    pub id: i64,
    pub name: String,
    pub hours: WeeklyHours,
    pub time_off: Vec<(NaiveDateTime, NaiveDateTime)>,
    pub service_ids: Vec<i64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deposit_is_an_amount_or_a_percentage_of_the_price() {
        let price = Cents(5000);
        let deposit = |raw: &str| ServiceSpec::parse_deposit(raw, price);
        assert_eq!(deposit("20.00"), Ok(Cents(2000)));
        assert_eq!(deposit("R$ 50,00"), Ok(Cents(5000)));
        assert_eq!(deposit("30%"), Ok(Cents(1500)));
        assert_eq!(deposit("33.33%"), Ok(Cents(1667)), "16.665 rounds half up");
        assert_eq!(deposit("100%"), Ok(Cents(5000)));
        assert_eq!(
            ServiceSpec::parse_deposit("0.01%", Cents(1000)),
            Err("deposit \"0.01%\" comes to R$ 0,00; it must be more than zero".into())
        );
        for bad in ["60", "0", "0%", "120%", "-5", "vinte", "%"] {
            assert!(deposit(bad).is_err(), "{bad}");
        }
    }
}
