//! Read tools over the catalog: `list_services`, `check_availability`.

use async_trait::async_trait;
use chrono::NaiveDate;
use serde_json::{Value, json};

use crate::appointments::{Bookings, free_slots, slots_json};
use crate::ledger::{Effect, FieldKind, FieldSpec, Tool, ToolCall, ToolFailure, ToolSpec};
use crate::store::{CatalogStore, Store};

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
        let (services, professionals) = self.store.catalog(call.ctx.tenant.id).await.map_err(ToolFailure::storage)?;
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
            .ok_or_else(|| ToolFailure::permanent("date must be YYYY-MM-DD", Value::Null))?;
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
