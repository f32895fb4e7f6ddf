//! Read tools over the catalog: `list_services`, `check_availability`.

use async_trait::async_trait;
use chrono::{NaiveDate, TimeDelta};
use serde_json::{Value, json};

use super::{local, permanent, transient};
use crate::booking::availability::{Day, Slot, slots_for};
use crate::ledger::{Effect, FieldKind, FieldSpec, Tool, ToolCall, ToolFailure, ToolSpec};
use crate::store::{BookingStore, CatalogStore, Store};

/// At most this many slots go back to the model: enough to choose, short enough to read.
const MAX_SLOTS: usize = 40;

pub struct ListServices {
    pub store: Store,
}

pub(super) static LIST_SERVICES: ToolSpec = ToolSpec {
    name: "list_services",
    description: "Lists the services the business offers (id, name, duration, price in BRL, and the deposit paid by Pix to confirm a booking, if any) and the professionals who perform each.",
    effect: Effect::Read,
    fields: &[],
};

#[async_trait]
impl Tool for ListServices {
    fn spec(&self) -> &'static ToolSpec {
        &LIST_SERVICES
    }

    async fn run(&self, call: &ToolCall<'_>) -> Result<Value, ToolFailure> {
        let (services, professionals) = self.store.catalog(call.ctx.tenant.id).await.map_err(transient)?;
        let services: Vec<Value> = services
            .iter()
            .map(|s| {
                let by: Vec<Value> = professionals
                    .iter()
                    .filter(|p| p.service_ids.contains(&s.id))
                    .map(|p| json!({ "id": p.id, "name": p.name }))
                    .collect();
                let mut service = json!({
                    "id": s.id,
                    "name": s.name,
                    "duration_minutes": s.duration_minutes,
                    "price": s.price.to_decimal(),
                    "professionals": by,
                });
                if s.deposit.0 > 0 {
                    service["deposit"] = json!(s.deposit.to_decimal());
                }
                service
            })
            .collect();
        Ok(json!({ "services": services, "currency": "BRL" }))
    }
}

pub struct CheckAvailability {
    pub store: Store,
}

pub(super) static CHECK_AVAILABILITY: ToolSpec = ToolSpec {
    name: "check_availability",
    description: "Free start times for a service on a date (YYYY-MM-DD in the business's time zone), for one professional or any. Only offer times this returns.",
    effect: Effect::Read,
    fields: &[
        FieldSpec {
            name: "service_id",
            kind: FieldKind::Id,
            required: true,
            identity: false,
            description: "From list_services.",
        },
        FieldSpec {
            name: "date",
            kind: FieldKind::Date,
            required: true,
            identity: false,
            description: "YYYY-MM-DD in the business's time zone.",
        },
        FieldSpec {
            name: "professional_id",
            kind: FieldKind::Id,
            required: false,
            identity: false,
            description: "Optional: only this professional.",
        },
    ],
};

/// Which slots to list.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Bookings {
    /// Leave out times taken by existing bookings: what a customer can still choose.
    Exclude,
    /// Every time offered by the hours and rules: the database decides overlaps.
    Ignore,
}

/// Slots of the day for `service_id`, for one professional or all who perform it.
pub(crate) async fn free_slots(
    store: &Store,
    call: &ToolCall<'_>,
    service_id: i64,
    date: NaiveDate,
    professional_id: Option<i64>,
    bookings: Bookings,
) -> Result<Vec<(Slot, String)>, ToolFailure> {
    let tenant = call.ctx.tenant;
    let (services, professionals) = store.catalog(tenant.id).await.map_err(transient)?;
    let service = services.iter().find(|s| s.id == service_id).ok_or_else(|| {
        permanent("unknown service_id; call list_services for valid ids", json!({ "service_id": service_id }))
    })?;
    if let Some(id) = professional_id
        && !professionals.iter().any(|p| p.id == id && p.service_ids.contains(&service.id))
    {
        return Err(permanent(
            "that professional does not perform this service; call list_services",
            json!({ "professional_id": id, "service_id": service_id }),
        ));
    }
    let day_start = date.and_hms_opt(0, 0, 0).map(|d| d.and_utc()).unwrap_or_default();
    let busy = match bookings {
        Bookings::Exclude => store
            .busy_blocks(tenant.id, day_start - TimeDelta::days(1), day_start + TimeDelta::days(2))
            .await
            .map_err(transient)?,
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

pub(crate) fn slots_json(slots: &[(Slot, String)], tz: chrono_tz::Tz) -> Vec<Value> {
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

#[async_trait]
impl Tool for CheckAvailability {
    fn spec(&self) -> &'static ToolSpec {
        &CHECK_AVAILABILITY
    }

    async fn run(&self, call: &ToolCall<'_>) -> Result<Value, ToolFailure> {
        let service_id = call.args.i64("service_id").unwrap_or_default();
        let date = call
            .args
            .str("date")
            .and_then(|d| NaiveDate::parse_from_str(d, "%Y-%m-%d").ok())
            .ok_or_else(|| permanent("date must be YYYY-MM-DD", Value::Null))?;
        let slots =
            free_slots(&self.store, call, service_id, date, call.args.i64("professional_id"), Bookings::Exclude)
                .await?;
        let tz = call.ctx.tenant.timezone;
        Ok(json!({
            "date": date.to_string(),
            "timezone": tz.name(),
            "service_id": service_id,
            "slots": slots_json(&slots, tz),
        }))
    }
}
