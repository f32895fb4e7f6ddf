//! The times a customer can choose: the booking rules (`crate::booking`) applied to the
//! catalog and the appointments the store holds.

use chrono::{DateTime, NaiveDate, TimeDelta, Utc};
use serde_json::{Value, json};

use super::local;
use crate::booking::availability::{Day, Slot, slots_for};
use crate::ledger::{ToolCall, ToolFailure};
use crate::store::{BookingStore, CatalogStore, Store};

/// Slots listed to the model at most (a long day of a busy salon has hundreds).
pub const MAX_SLOTS: usize = 40;

/// Which slots to list.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Bookings {
    /// Leave out times taken by existing bookings: what a customer can still choose.
    Exclude,
    /// Every time offered by the hours and rules: the database decides overlaps.
    Ignore,
}

/// Slots of the day for `service_id`, for one professional or all who perform it.
pub async fn free_slots(
    store: &Store,
    call: &ToolCall<'_>,
    service_id: i64,
    date: NaiveDate,
    professional_id: Option<i64>,
    bookings: Bookings,
) -> Result<Vec<(Slot, String)>, ToolFailure> {
    let tenant = call.ctx.tenant;
    let (services, professionals) = store.catalog(tenant.id).await.map_err(ToolFailure::storage)?;
    let service = services.iter().find(|s| s.id == service_id).ok_or_else(|| {
        ToolFailure::permanent(
            "unknown service_id; call list_services for valid ids",
            json!({ "service_id": service_id }),
        )
    })?;
    if let Some(id) = professional_id
        && !professionals.iter().any(|p| p.id == id && p.service_ids.contains(&service.id))
    {
        return Err(ToolFailure::permanent(
            "that professional does not perform this service; call list_services",
            json!({ "professional_id": id, "service_id": service_id }),
        ));
    }
    let day_start = date.and_hms_opt(0, 0, 0).map(|d| d.and_utc()).unwrap_or_default();
    let busy = match bookings {
        Bookings::Exclude => store
            .busy_blocks(tenant.id, day_start - TimeDelta::days(1), day_start + TimeDelta::days(2))
            .await
            .map_err(ToolFailure::storage)?,
        Bookings::Ignore => Vec::new(),
    };
    let day = Day { tz: tenant.timezone, settings: &tenant.booking, date, now: call.ctx.now };
    let mut slots: Vec<(Slot, String)> = professionals
        .iter()
        .filter(|p| professional_id.is_none_or(|id| id == p.id))
        .flat_map(|p| {
            let mine: Vec<_> = busy.iter().filter(|(pro, _, _)| *pro == p.id).map(|(_, b, e)| (*b, *e)).collect();
            slots_for(&day, service, p, &mine).into_iter().map(|s| (s, p.name.clone()))
        })
        .collect();
    slots.sort_by_key(|(s, _)| (s.starts_at, s.professional_id));
    Ok(slots)
}

pub fn slots_json(slots: &[(Slot, String)], tz: chrono_tz::Tz) -> Vec<Value> {
    slots
        .iter()
        .take(MAX_SLOTS)
        .map(|(s, name)| {
            json!({
                "professional_id": s.professional_id,
                "professional_name": name,
                "starts_at": local(tz, s.starts_at.with_timezone(&chrono::Utc)),
            })
        })
        .collect()
}

/// The slot a write asked for: what a "slot taken" refusal offers alternatives to.
#[derive(Debug, Clone, Copy)]
pub struct Wanted {
    pub service_id: i64,
    pub professional_id: i64,
    pub start: DateTime<Utc>,
}

/// Checks that `start` is an offered start of `professional_id` for `service_id` (hours,
/// notice, horizon, step, time off), ignoring existing bookings: the database decides
/// overlaps.
pub async fn check_offered(store: &Store, call: &ToolCall<'_>, wanted: Wanted) -> Result<(), ToolFailure> {
    let date = wanted.start.with_timezone(&call.ctx.tenant.timezone).date_naive();
    let offered =
        free_slots(store, call, wanted.service_id, date, Some(wanted.professional_id), Bookings::Ignore).await?;
    if offered.iter().any(|(s, _)| s.starts_at == wanted.start) {
        return Ok(());
    }
    Err(ToolFailure::refused(
        "not_available: that time is not offered (outside working hours, too soon or too far ahead)",
        json!({ "reason": "not_available", "alternatives": alternatives(store, call, wanted).await }),
    ))
}

/// What the customer can still choose that day, sent along with a refusal.
pub async fn alternatives(store: &Store, call: &ToolCall<'_>, wanted: Wanted) -> Value {
    let date = wanted.start.with_timezone(&call.ctx.tenant.timezone).date_naive();
    match free_slots(store, call, wanted.service_id, date, Some(wanted.professional_id), Bookings::Exclude).await {
        Ok(free) => Value::from(slots_json(&free, call.ctx.tenant.timezone)),
        Err(_) => Value::Array(Vec::new()),
    }
}
