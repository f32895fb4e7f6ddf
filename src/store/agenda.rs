//! Reading the agenda across appointments: a day's bookings for the merchant, the bookings a
//! reminder is due for, and a reminder's attendance answer.

use chrono::{DateTime, Utc};

use super::appointments::appointment_columns;
use super::{Dialect, Store, StoreResult, reading, writing};
use crate::booking::Appointment;
use crate::domain::{ContactId, TenantId};
use crate::tenant::DEFAULT_HOURS_BEFORE;

/// The reminder sweep's query in a dialect: how to read a tenant's `hours_before` from its
/// settings, the moment a reminder is due, and times in the form that compares with it.
macro_rules! reminders_due_sql {
    ($hours:literal, $due:literal, $now:literal, $created:literal) => {
        concat!(
            "WITH h AS (SELECT id AS tenant_id, COALESCE(",
            $hours,
            ", $3) AS hours FROM tenants)
             SELECT appointments.tenant_id, ",
            appointment_columns!(),
            "
             FROM appointments JOIN h ON h.tenant_id = appointments.tenant_id
             WHERE status = 'confirmed' AND starts_at >= $1 AND starts_at < $2 AND h.hours > 0
               AND ",
            $due,
            " <= ",
            $now,
            " AND ",
            $created,
            " <= ",
            $due,
            "
               AND NOT EXISTS (SELECT 1 FROM reminders r WHERE r.tenant_id = appointments.tenant_id
                               AND r.appointment_id = appointments.id AND r.starts_at = appointments.starts_at)
             ORDER BY starts_at, id"
        )
    };
}

#[allow(async_fn_in_trait)]
pub trait AgendaStore {
    /// Records that the customer confirmed they will come (a reminder's button); `None` when
    /// the appointment is not theirs or no longer active.
    async fn confirm_attendance(
        &self,
        tenant: TenantId,
        contact: ContactId,
        id: i64,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<Appointment>>;
    /// The tenant's active appointments starting in `[from, to)`, with the customer's name
    /// and WhatsApp number, by start.
    async fn agenda(
        &self,
        tenant: TenantId,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> StoreResult<Vec<(Appointment, Option<String>, Option<String>)>>;
    /// Confirmed appointments whose reminder is due at `now`, for every tenant: starting
    /// before `horizon`, at most their tenant's `hours_before` ahead (reminders on, booked
    /// before that moment), not reminded yet for that start; by start. A hold waiting for its
    /// deposit is not reminded of; once paid, it is. The due test is in the query, so a sweep
    /// reads only what it sends, however many tenants and bookings there are.
    async fn reminders_due(
        &self,
        now: DateTime<Utc>,
        horizon: DateTime<Utc>,
    ) -> StoreResult<Vec<(TenantId, Appointment)>>;
}

impl AgendaStore for Store {
    async fn confirm_attendance(
        &self,
        tenant: TenantId,
        contact: ContactId,
        id: i64,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<Appointment>> {
        Ok(writing!(self, pool => {
            sqlx::query_as(concat!(
                "UPDATE appointments SET attendance_confirmed_at = COALESCE(attendance_confirmed_at, $1), updated_at = $1
                 WHERE tenant_id = $2 AND contact_id = $3 AND id = $4 AND status IN ('held', 'confirmed')
                 RETURNING ", appointment_columns!()
            ))
            .bind(now)
            .bind(tenant.0)
            .bind(contact.0)
            .bind(id)
            .fetch_optional(pool)
            .await
        })?)
    }

    async fn agenda(
        &self,
        tenant: TenantId,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> StoreResult<Vec<(Appointment, Option<String>, Option<String>)>> {
        #[derive(sqlx::FromRow)]
        struct Row {
            #[sqlx(flatten)]
            appointment: Appointment,
            profile_name: Option<String>,
            wa_id: Option<String>,
        }
        let rows: Vec<Row> = reading!(self, pool => {
            sqlx::query_as(
                "SELECT a.id, a.contact_id, a.service_id, a.professional_id, a.starts_at, a.ends_at, a.status,
                        a.price_cents, a.deposit_cents, a.hold_expires_at, c.profile_name, c.wa_id
                 FROM appointments a JOIN contacts c ON c.id = a.contact_id AND c.tenant_id = a.tenant_id
                 WHERE a.tenant_id = $1 AND a.status IN ('held', 'confirmed') AND a.starts_at >= $2 AND a.starts_at < $3
                 ORDER BY a.starts_at, a.id",
            )
            .bind(tenant.0)
            .bind(from)
            .bind(to)
            .fetch_all(pool)
            .await
        })?;
        Ok(rows.into_iter().map(|r| (r.appointment, r.profile_name, r.wa_id.map(|w| format!("+{w}")))).collect())
    }

    async fn reminders_due(
        &self,
        now: DateTime<Utc>,
        horizon: DateTime<Utc>,
    ) -> StoreResult<Vec<(TenantId, Appointment)>> {
        #[derive(sqlx::FromRow)]
        struct Row {
            tenant_id: i64,
            #[sqlx(flatten)]
            appointment: Appointment,
        }
        let default_hours = i32::try_from(DEFAULT_HOURS_BEFORE).unwrap_or(i32::MAX);
        let rows: Vec<Row> = reading!(self, pool => {
            let sql = pool.pick(
                reminders_due_sql!(
                    "json_extract(settings, '$.reminders.hours_before')",
                    "julianday(starts_at) - h.hours / 24.0",
                    "julianday($1)",
                    "julianday(created_at)"
                ),
                reminders_due_sql!(
                    "(settings->'reminders'->>'hours_before')::int",
                    "starts_at - make_interval(hours => h.hours)",
                    "$1",
                    "created_at"
                ),
            );
            sqlx::query_as(sql).bind(now).bind(horizon).bind(default_hours).fetch_all(pool).await
        })?;
        Ok(rows.into_iter().map(|r| (TenantId(r.tenant_id), r.appointment)).collect())
    }
}
