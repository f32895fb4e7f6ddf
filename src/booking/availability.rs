//! The slot engine: which start times a professional can take for a service on a date, in the
//! tenant's time zone. Pure: the caller passes what is already booked.

use chrono::{DateTime, LocalResult, NaiveDate, NaiveDateTime, TimeDelta, TimeZone, Utc};
use chrono_tz::Tz;

use super::{BookingSettings, Professional, Service};

/// An offered start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slot {
    pub professional_id: i64,
    pub starts_at: DateTime<Tz>,
}

/// Everything the engine needs besides the catalog.
pub struct Day<'a> {
    pub tz: Tz,
    pub settings: &'a BookingSettings,
    pub date: NaiveDate,
    pub now: DateTime<Utc>,
}

/// The UTC instant of a wall-clock time; in a daylight-saving gap there is none, and in an
/// overlap the earlier one is used.
pub fn to_utc(tz: Tz, local: NaiveDateTime) -> Option<DateTime<Utc>> {
    match tz.from_local_datetime(&local) {
        LocalResult::Single(t) => Some(t.with_timezone(&Utc)),
        LocalResult::Ambiguous(first, _) => Some(first.with_timezone(&Utc)),
        LocalResult::None => None,
    }
}

/// Like [`to_utc`], but a time in a daylight-saving gap moves to the first instant after it
/// (a time-off or closing boundary must not vanish on the day clocks jump).
pub fn to_utc_forward(tz: Tz, local: NaiveDateTime) -> Option<DateTime<Utc>> {
    (0..=12).find_map(|quarter| to_utc(tz, local + TimeDelta::minutes(15 * quarter)))
}

/// The block an appointment occupies: `[start, start + duration + buffer)`.
pub fn block(service: &Service, start: DateTime<Utc>) -> (DateTime<Utc>, DateTime<Utc>) {
    (start, start + TimeDelta::minutes(service.duration_minutes + service.buffer_minutes))
}

/// Free starts of `professional` for `service` on `day`, given `busy` blocks (UTC).
pub fn slots_for(
    day: &Day<'_>,
    service: &Service,
    professional: &Professional,
    busy: &[(DateTime<Utc>, DateTime<Utc>)],
) -> Vec<Slot> {
    if !professional.service_ids.contains(&service.id) {
        return Vec::new();
    }
    let earliest = day.now + TimeDelta::minutes(i64::from(day.settings.min_notice_minutes));
    let latest = day.now + TimeDelta::days(i64::from(day.settings.horizon_days));
    let step = TimeDelta::minutes(i64::from(day.settings.slot_step_minutes.max(5)));
    let duration = TimeDelta::minutes(service.duration_minutes);
    let time_off: Vec<_> = professional
        .time_off
        .iter()
        .filter_map(|(from, to)| Some((to_utc_forward(day.tz, *from)?, to_utc_forward(day.tz, *to)?)))
        .collect();
    let mut slots = Vec::new();
    for (open, close) in professional.hours.on(chrono::Datelike::weekday(&day.date)) {
        let mut local = day.date.and_time(*open);
        let close_local = day.date.and_time(*close);
        // Compared as instants: on the day clocks jump, wall-clock arithmetic would lie.
        let Some(close) = to_utc_forward(day.tz, close_local) else { continue };
        while local < close_local {
            if let Some(start) = to_utc(day.tz, local)
                && start + duration <= close
            {
                let (from, to) = block(service, start);
                let free = !busy.iter().chain(&time_off).any(|(b, e)| *b < to && from < *e);
                if start >= earliest && start <= latest && free {
                    slots.push(Slot { professional_id: professional.id, starts_at: start.with_timezone(&day.tz) });
                }
            }
            local += step;
        }
    }
    slots
}

#[cfg(test)]
mod tests {
    use chrono::NaiveTime;

    use super::*;
    use crate::booking::WeeklyHours;
    use crate::domain::Cents;

    fn service() -> Service {
        Service {
            id: 1,
            name: "Corte".into(),
            duration_minutes: 30,
            buffer_minutes: 10,
            price: Cents(5000),
            deposit: Cents(0),
        }
    }

    fn professional() -> Professional {
        let mut hours = WeeklyHours::default();
        let t = |s: &str| NaiveTime::parse_from_str(s, "%H:%M").unwrap();
        for day in chrono::Weekday::Mon.num_days_from_monday()..7 {
            hours.0[day as usize] = vec![(t("09:00"), t("12:00")), (t("13:00"), t("15:00"))];
        }
        Professional { id: 7, name: "Zé".into(), hours, time_off: vec![], service_ids: vec![1] }
    }

    fn starts(slots: &[Slot]) -> Vec<String> {
        slots.iter().map(|s| s.starts_at.to_rfc3339()).collect()
    }

    #[test]
    fn wall_clock_hours_in_each_brazilian_zone() {
        let settings =
            BookingSettings { min_notice_minutes: 0, horizon_days: 400, slot_step_minutes: 60, ..Default::default() };
        let date = NaiveDate::from_ymd_opt(2026, 3, 11).unwrap();
        let now = Utc.with_ymd_and_hms(2026, 3, 1, 0, 0, 0).unwrap();
        for (tz, offset) in [
            (chrono_tz::America::Sao_Paulo, "-03:00"),
            (chrono_tz::America::Manaus, "-04:00"),
            (chrono_tz::America::Noronha, "-02:00"),
        ] {
            let day = Day { tz, settings: &settings, date, now };
            let s = slots_for(&day, &service(), &professional(), &[]);
            assert_eq!(
                starts(&s),
                ["09:00", "10:00", "11:00", "13:00", "14:00"].map(|h| format!("2026-03-11T{h}:00{offset}")),
                "{tz}"
            );
        }
    }

    #[test]
    fn daylight_saving_gap_and_overlap() {
        // New York springs forward on 2026-03-08 at 02:00: 02:30 does not exist that day.
        let settings =
            BookingSettings { min_notice_minutes: 0, horizon_days: 400, slot_step_minutes: 30, ..Default::default() };
        let mut p = professional();
        let t = |s: &str| NaiveTime::parse_from_str(s, "%H:%M").unwrap();
        p.hours.0[6] = vec![(t("01:00"), t("04:00"))];
        let now = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
        let tz = chrono_tz::America::New_York;
        let day = Day { tz, settings: &settings, date: NaiveDate::from_ymd_opt(2026, 3, 8).unwrap(), now };
        let s = starts(&slots_for(&day, &service(), &p, &[]));
        assert_eq!(
            s,
            [
                "2026-03-08T01:00:00-05:00",
                "2026-03-08T01:30:00-05:00",
                "2026-03-08T03:00:00-04:00",
                "2026-03-08T03:30:00-04:00"
            ]
        );
        // A 60-minute service at 01:30 would really end at 03:30, after the 03:00 close.
        let mut long = service();
        long.duration_minutes = 60;
        p.hours.0[6] = vec![(t("01:00"), t("03:00"))];
        let s = starts(&slots_for(&day, &long, &p, &[]));
        assert_eq!(s, ["2026-03-08T01:00:00-05:00"]);
        p.hours.0[6] = vec![(t("01:00"), t("04:00"))];
        // ...and falls back on 2026-11-01: 01:30 happens twice; the first is offered once.
        let day = Day { tz, settings: &settings, date: NaiveDate::from_ymd_opt(2026, 11, 1).unwrap(), now };
        let s = starts(&slots_for(&day, &service(), &p, &[]));
        assert_eq!(s[..2], ["2026-11-01T01:00:00-04:00", "2026-11-01T01:30:00-04:00"]);
        assert_eq!(s.len(), 6);
    }

    #[test]
    fn notice_horizon_busy_and_time_off() {
        let settings =
            BookingSettings { min_notice_minutes: 120, horizon_days: 30, slot_step_minutes: 60, ..Default::default() };
        let tz = chrono_tz::America::Sao_Paulo;
        let date = NaiveDate::from_ymd_opt(2026, 3, 11).unwrap();
        // 10:30 local: with 2 h notice the first offer is 13:00.
        let now = Utc.with_ymd_and_hms(2026, 3, 11, 13, 30, 0).unwrap();
        let day = Day { tz, settings: &settings, date, now };
        // 13:00-13:40 is booked (buffer included): 13:00 is gone, 14:00 stays.
        let busy = [(
            Utc.with_ymd_and_hms(2026, 3, 11, 16, 0, 0).unwrap(),
            Utc.with_ymd_and_hms(2026, 3, 11, 16, 40, 0).unwrap(),
        )];
        assert_eq!(starts(&slots_for(&day, &service(), &professional(), &busy)), ["2026-03-11T14:00:00-03:00"]);
        let later = Day { tz, settings: &settings, date: NaiveDate::from_ymd_opt(2026, 5, 11).unwrap(), now };
        assert!(slots_for(&later, &service(), &professional(), &[]).is_empty(), "beyond the horizon");
        let mut off = professional();
        off.time_off = vec![(date.and_hms_opt(0, 0, 0).unwrap(), date.and_hms_opt(23, 59, 0).unwrap())];
        assert!(slots_for(&day, &service(), &off, &[]).is_empty());
        let mut other = service();
        other.id = 2;
        assert!(slots_for(&day, &other, &professional(), &[]).is_empty(), "does not perform it");
    }
}
