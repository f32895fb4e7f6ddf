//! Booking tools: `list_my_bookings` reads; `create_booking`, `cancel_booking` and
//! `reschedule_booking` write (business keys: the customer and, respectively, the
//! professional and start, the appointment, the appointment and its new start).

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::catalog::{Bookings, free_slots, slots_json};
use super::{booking_json, permanent, transient};
use crate::booking::availability::block;
use crate::booking::{Appointment, BookingError, Service};
use crate::ledger::normalize::parse_instant;
use crate::ledger::{Effect, FieldKind, FieldSpec, KeyPolicy, Tool, ToolCall, ToolFailure, ToolSpec};
use crate::store::{BookingStore, NewAppointment, Store};

fn starts_at(call: &ToolCall<'_>) -> Result<DateTime<Utc>, ToolFailure> {
    call.args
        .str("starts_at")
        .and_then(|s| parse_instant(s).ok())
        .ok_or_else(|| permanent("starts_at must be a date-time with an offset", Value::Null))
}

/// Checks that `start` is an offered start of `professional_id` for `service_id` (hours,
/// notice, horizon, step), ignoring existing bookings: the database decides overlaps.
async fn check_offered(
    store: &Store,
    call: &ToolCall<'_>,
    service_id: i64,
    professional_id: i64,
    start: DateTime<Utc>,
) -> Result<(), ToolFailure> {
    let date = start.with_timezone(&call.ctx.tenant.timezone).date_naive();
    let offered = free_slots(store, call, service_id, date, Some(professional_id), Bookings::Ignore).await?;
    if offered.iter().any(|(s, _)| s.starts_at == start) {
        return Ok(());
    }
    Err(permanent(
        "not_available: that time is not offered (outside working hours, too soon or too far ahead)",
        json!({ "reason": "not_available", "alternatives": alternatives(store, call, service_id, professional_id, start).await }),
    ))
}

/// What the customer can still choose that day, sent along with a refusal.
async fn alternatives(
    store: &Store,
    call: &ToolCall<'_>,
    service_id: i64,
    professional_id: i64,
    start: DateTime<Utc>,
) -> Value {
    let date = start.with_timezone(&call.ctx.tenant.timezone).date_naive();
    match free_slots(store, call, service_id, date, Some(professional_id), Bookings::Exclude).await {
        Ok(free) => Value::from(slots_json(&free, call.ctx.tenant.timezone)),
        Err(_) => Value::Array(Vec::new()),
    }
}

/// The booking as the model sees it. Never fails: it runs after the effect committed, so a
/// failed catalog read only leaves the names out.
async fn render(store: &Store, call: &ToolCall<'_>, a: &Appointment) -> Result<Value, ToolFailure> {
    let (services, professionals) = store.catalog(call.ctx.tenant.id).await.unwrap_or_default();
    Ok(booking_json(a, &services, &professionals, call.ctx.tenant.timezone))
}

pub struct ListMyBookings {
    pub store: Store,
}

static LIST_MY_BOOKINGS: ToolSpec = ToolSpec {
    name: "list_my_bookings",
    description: "The customer's upcoming appointments (booking_id, service, professional, start in the business's time zone).",
    effect: Effect::Read,
    fields: &[],
};

#[async_trait]
impl Tool for ListMyBookings {
    fn spec(&self) -> &'static ToolSpec {
        &LIST_MY_BOOKINGS
    }

    async fn run(&self, call: &ToolCall<'_>) -> Result<Value, ToolFailure> {
        let ctx = call.ctx;
        let upcoming =
            self.store.upcoming_appointments(ctx.tenant.id, ctx.customer, ctx.now).await.map_err(transient)?;
        let (services, professionals) = self.store.catalog(ctx.tenant.id).await.map_err(transient)?;
        let bookings: Vec<Value> =
            upcoming.iter().map(|a| booking_json(a, &services, &professionals, ctx.tenant.timezone)).collect();
        Ok(json!({ "bookings": bookings }))
    }
}

pub struct CreateBooking {
    pub store: Store,
}

static CREATE_BOOKING: ToolSpec = ToolSpec {
    name: "create_booking",
    description: "Books the customer for a service with a professional at a start time returned by check_availability.",
    effect: Effect::Write {
        policy: KeyPolicy::Business,
        on_conflict: "This customer already has a booking with this professional at this time, with other details. \
                      Do not book again: use reschedule_booking to move it or cancel_booking to drop it (list_my_bookings shows it).",
    },
    fields: &[
        FieldSpec {
            name: "service_id",
            kind: FieldKind::Id,
            required: true,
            identity: false,
            description: "From list_services.",
        },
        FieldSpec {
            name: "professional_id",
            kind: FieldKind::Id,
            required: true,
            identity: true,
            description: "From check_availability.",
        },
        FieldSpec {
            name: "starts_at",
            kind: FieldKind::Instant,
            required: true,
            identity: true,
            description: "RFC 3339 with offset, exactly as check_availability returned it.",
        },
    ],
};

#[async_trait]
impl Tool for CreateBooking {
    fn spec(&self) -> &'static ToolSpec {
        &CREATE_BOOKING
    }

    async fn run(&self, call: &ToolCall<'_>) -> Result<Value, ToolFailure> {
        let ctx = call.ctx;
        let key = call.key.ok_or_else(|| ToolFailure::Transient("create_booking runs through the ledger".into()))?;
        // A re-run (takeover after a crash) finds what the earlier attempt booked.
        if call.attempt.is_some_and(|a| a.previous.is_some())
            && let Some(existing) = self.store.appointment_by_key(ctx.tenant.id, key).await.map_err(transient)?
        {
            return render(&self.store, call, &existing).await;
        }
        let service_id = call.args.i64("service_id").unwrap_or_default();
        let professional_id = call.args.i64("professional_id").unwrap_or_default();
        let start = starts_at(call)?;
        check_offered(&self.store, call, service_id, professional_id, start).await?;
        let (services, _) = self.store.catalog(ctx.tenant.id).await.map_err(transient)?;
        let service: &Service =
            services.iter().find(|s| s.id == service_id).ok_or_else(|| permanent("unknown service_id", Value::Null))?;
        let (starts_at, ends_at) = block(service, start);
        let new = NewAppointment {
            tenant: ctx.tenant.id,
            contact: ctx.customer,
            service_id,
            professional_id,
            starts_at,
            ends_at,
            price: service.price,
            key,
        };
        match self.store.insert_appointment(&new, ctx.now).await {
            Ok(appointment) => render(&self.store, call, &appointment).await,
            Err(BookingError::SlotTaken) => {
                // The holder of this key may have booked it a moment ago (a takeover race).
                if let Ok(Some(mine)) = self.store.appointment_by_key(ctx.tenant.id, key).await {
                    return render(&self.store, call, &mine).await;
                }
                Err(permanent(
                    "slot_taken: that time was just taken by someone else",
                    json!({ "reason": "slot_taken", "alternatives": alternatives(&self.store, call, service_id, professional_id, start).await }),
                ))
            }
            Err(BookingError::NotFound(what)) => Err(permanent(format!("not found: {what}"), Value::Null)),
            Err(BookingError::Store(e)) => Err(transient(e)),
        }
    }
}

pub struct CancelBooking {
    pub store: Store,
}

static CANCEL_BOOKING: ToolSpec = ToolSpec {
    name: "cancel_booking",
    description: "Cancels one of the customer's upcoming bookings.",
    effect: Effect::Write {
        policy: KeyPolicy::Business,
        on_conflict: "This booking was already handled. Call list_my_bookings to see the current state.",
    },
    fields: &[FieldSpec {
        name: "booking_id",
        kind: FieldKind::Id,
        required: true,
        identity: true,
        description: "From list_my_bookings.",
    }],
};

#[async_trait]
impl Tool for CancelBooking {
    fn spec(&self) -> &'static ToolSpec {
        &CANCEL_BOOKING
    }

    async fn run(&self, call: &ToolCall<'_>) -> Result<Value, ToolFailure> {
        let ctx = call.ctx;
        let id = call.args.i64("booking_id").unwrap_or_default();
        if let Some(cancelled) =
            self.store.cancel_appointment(ctx.tenant.id, ctx.customer, id, ctx.now).await.map_err(transient)?
        {
            return render(&self.store, call, &cancelled).await;
        }
        match self.store.appointment(ctx.tenant.id, id).await.map_err(transient)? {
            // Cancelled by an earlier attempt that died before recording it: same outcome.
            Some(a) if a.contact_id == ctx.customer.0 && a.status == "cancelled" => render(&self.store, call, &a).await,
            Some(a) if a.contact_id == ctx.customer.0 => {
                Err(permanent(format!("booking {id} cannot be cancelled: it is {}", a.status), Value::Null))
            }
            _ => {
                Err(permanent(format!("booking {id} not found for this customer; call list_my_bookings"), Value::Null))
            }
        }
    }
}

pub struct RescheduleBooking {
    pub store: Store,
}

static RESCHEDULE_BOOKING: ToolSpec = ToolSpec {
    name: "reschedule_booking",
    description: "Moves one of the customer's upcoming bookings to a new start returned by check_availability (same service and professional).",
    effect: Effect::Write {
        policy: KeyPolicy::Business,
        on_conflict: "This booking was already moved. Call list_my_bookings to see the current time.",
    },
    fields: &[
        FieldSpec {
            name: "booking_id",
            kind: FieldKind::Id,
            required: true,
            identity: true,
            description: "From list_my_bookings.",
        },
        FieldSpec {
            name: "starts_at",
            kind: FieldKind::Instant,
            required: true,
            identity: true,
            description: "RFC 3339 with offset, from check_availability.",
        },
    ],
};

#[async_trait]
impl Tool for RescheduleBooking {
    fn spec(&self) -> &'static ToolSpec {
        &RESCHEDULE_BOOKING
    }

    async fn run(&self, call: &ToolCall<'_>) -> Result<Value, ToolFailure> {
        let ctx = call.ctx;
        let id = call.args.i64("booking_id").unwrap_or_default();
        let start = starts_at(call)?;
        let current = match self.store.appointment(ctx.tenant.id, id).await.map_err(transient)? {
            Some(a) if a.contact_id == ctx.customer.0 && matches!(a.status.as_str(), "held" | "confirmed") => a,
            _ => {
                return Err(permanent(
                    format!("booking {id} not found among this customer's upcoming bookings"),
                    Value::Null,
                ));
            }
        };
        if current.starts_at == start {
            return render(&self.store, call, &current).await;
        }
        check_offered(&self.store, call, current.service_id, current.professional_id, start).await?;
        let new_block = (start, start + (current.ends_at - current.starts_at));
        match self
            .store
            .move_appointment(ctx.tenant.id, ctx.customer, id, new_block, ctx.now, RESCHEDULE_BOOKING.name)
            .await
        {
            Ok(Some(moved)) => render(&self.store, call, &moved).await,
            Ok(None) => Err(permanent(format!("booking {id} is no longer active"), Value::Null)),
            Err(BookingError::SlotTaken) => Err(permanent(
                "slot_taken: that time was just taken by someone else",
                json!({ "reason": "slot_taken", "alternatives": alternatives(&self.store, call, current.service_id, current.professional_id, start).await }),
            )),
            Err(BookingError::NotFound(what)) => Err(permanent(format!("not found: {what}"), Value::Null)),
            Err(BookingError::Store(e)) => Err(transient(e)),
        }
    }
}
