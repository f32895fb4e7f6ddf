//! Catalog and appointments. The overlap rule lives in the schema (see the migrations); this
//! file only turns its violation into [`BookingError::SlotTaken`].

use chrono::{DateTime, NaiveDateTime, Utc};
use sqlx::types::Json;

use super::{Dialect, Store, StoreError, StoreResult, reading, writing};
use crate::booking::{Appointment, BookingError, CatalogSpec, Professional, Service, WeeklyHours};
use crate::domain::{Cents, ContactId, TenantId};
use crate::ledger::LedgerKey;

/// A new appointment.
#[derive(Debug, Clone)]
pub struct NewAppointment<'a> {
    pub tenant: TenantId,
    pub contact: ContactId,
    pub service_id: i64,
    pub professional_id: i64,
    pub starts_at: DateTime<Utc>,
    pub ends_at: DateTime<Utc>,
    pub price: Cents,
    /// The ledger key of the call that books it: a re-run finds the same row.
    pub key: &'a LedgerKey,
}

#[allow(async_fn_in_trait)]
pub trait BookingStore {
    /// Makes the stored catalog match the file: upserts by name, deactivates what is gone
    /// (ids stay stable for existing appointments). Returns whether anything changed.
    async fn apply_catalog(&self, tenant: TenantId, catalog: &CatalogSpec) -> StoreResult<bool>;
    /// Active services and professionals.
    async fn catalog(&self, tenant: TenantId) -> StoreResult<(Vec<Service>, Vec<Professional>)>;
    /// Active appointments of these professionals overlapping `[from, to)`.
    async fn busy_blocks(
        &self,
        tenant: TenantId,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> StoreResult<Vec<(i64, DateTime<Utc>, DateTime<Utc>)>>;
    /// Books, or returns the appointment this key already booked.
    async fn insert_appointment(
        &self,
        new: &NewAppointment<'_>,
        now: DateTime<Utc>,
    ) -> Result<Appointment, BookingError>;
    async fn appointment(&self, tenant: TenantId, id: i64) -> StoreResult<Option<Appointment>>;
    /// The appointment a ledger key booked, if any.
    async fn appointment_by_key(&self, tenant: TenantId, key: &LedgerKey) -> StoreResult<Option<Appointment>>;
    /// Cancels the customer's active, future appointment and supersedes the ledger row that
    /// booked it (same transaction); `None` if there is no such appointment.
    async fn cancel_appointment(
        &self,
        tenant: TenantId,
        contact: ContactId,
        id: i64,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<Appointment>>;
    /// Moves the customer's active appointment and supersedes earlier successful `move_tool`
    /// calls for it (same transaction).
    async fn move_appointment(
        &self,
        tenant: TenantId,
        contact: ContactId,
        id: i64,
        block: (DateTime<Utc>, DateTime<Utc>),
        now: DateTime<Utc>,
        move_tool: &str,
    ) -> Result<Option<Appointment>, BookingError>;
    /// The customer's active appointments starting at or after `from`.
    async fn upcoming_appointments(
        &self,
        tenant: TenantId,
        contact: ContactId,
        from: DateTime<Utc>,
    ) -> StoreResult<Vec<Appointment>>;
    async fn count_active_appointments(&self, tenant: TenantId) -> StoreResult<i64>;
}

/// The columns of [`Appointment`], for `SELECT` and `RETURNING`.
macro_rules! appointment_columns {
    () => {
        "id, contact_id, service_id, professional_id, starts_at, ends_at, status, price_cents"
    };
}

fn overlap_or(e: sqlx::Error) -> BookingError {
    if let sqlx::Error::Database(db) = &e
        && (db.code().as_deref() == Some("23P01") || db.message().contains("appointment_overlap"))
    {
        return BookingError::SlotTaken;
    }
    BookingError::Store(e.into())
}

#[derive(sqlx::FromRow)]
struct ServiceRow {
    id: i64,
    name: String,
    duration_minutes: i64,
    buffer_minutes: i64,
    price_cents: i64,
}

#[derive(sqlx::FromRow)]
struct ProfessionalRow {
    id: i64,
    name: String,
    hours: Json<WeeklyHours>,
    time_off: Json<Vec<(NaiveDateTime, NaiveDateTime)>>,
}

impl BookingStore for Store {
    async fn apply_catalog(&self, tenant: TenantId, catalog: &CatalogSpec) -> StoreResult<bool> {
        writing!(self, pool => {
            let mut tx = pool.begin_write().await?;
            let s = &catalog.settings;
            let mut changed = sqlx::query(
                "UPDATE tenants SET min_notice_minutes = $1, horizon_days = $2, slot_step_minutes = $3
                 WHERE id = $4 AND (min_notice_minutes <> $1 OR horizon_days <> $2 OR slot_step_minutes <> $3)",
            )
            .bind(i64::from(s.min_notice_minutes))
            .bind(i64::from(s.horizon_days))
            .bind(i64::from(s.slot_step_minutes))
            .bind(tenant.0)
            .execute(&mut *tx)
            .await?
            .rows_affected()
                > 0;

            let mut service_ids = Vec::new();
            for service in &catalog.services {
                let touched = sqlx::query(
                    "INSERT INTO services (tenant_id, name, duration_minutes, buffer_minutes, price_cents, active)
                     VALUES ($1, $2, $3, $4, $5, TRUE)
                     ON CONFLICT (tenant_id, name) DO UPDATE SET
                         duration_minutes = excluded.duration_minutes, buffer_minutes = excluded.buffer_minutes,
                         price_cents = excluded.price_cents, active = TRUE
                     WHERE services.duration_minutes <> excluded.duration_minutes
                        OR services.buffer_minutes <> excluded.buffer_minutes
                        OR services.price_cents <> excluded.price_cents OR NOT services.active",
                )
                .bind(tenant.0)
                .bind(&service.name)
                .bind(i64::from(service.duration_minutes))
                .bind(i64::from(service.buffer_minutes))
                .bind(service.price.0)
                .execute(&mut *tx)
                .await?
                .rows_affected();
                changed |= touched > 0;
                let id: i64 = sqlx::query_scalar("SELECT id FROM services WHERE tenant_id = $1 AND name = $2")
                    .bind(tenant.0)
                    .bind(&service.name)
                    .fetch_one(&mut *tx)
                    .await?;
                service_ids.push((service.name.clone(), id));
            }
            let active: Vec<(i64, String)> = sqlx::query_as("SELECT id, name FROM services WHERE tenant_id = $1 AND active")
                .bind(tenant.0)
                .fetch_all(&mut *tx)
                .await?;
            for (id, _) in active.iter().filter(|(_, name)| !catalog.services.iter().any(|s| &s.name == name)) {
                sqlx::query("UPDATE services SET active = FALSE WHERE tenant_id = $1 AND id = $2")
                    .bind(tenant.0)
                    .bind(id)
                    .execute(&mut *tx)
                    .await?;
                changed = true;
            }

            for professional in &catalog.professionals {
                let touched = sqlx::query(
                    "INSERT INTO professionals (tenant_id, name, hours, time_off, active) VALUES ($1, $2, $3, $4, TRUE)
                     ON CONFLICT (tenant_id, name) DO UPDATE SET
                         hours = excluded.hours, time_off = excluded.time_off, active = TRUE
                     WHERE professionals.hours <> excluded.hours OR professionals.time_off <> excluded.time_off
                        OR NOT professionals.active",
                )
                .bind(tenant.0)
                .bind(&professional.name)
                .bind(Json(&professional.hours))
                .bind(Json(&professional.time_off))
                .execute(&mut *tx)
                .await?
                .rows_affected();
                changed |= touched > 0;
                let id: i64 = sqlx::query_scalar("SELECT id FROM professionals WHERE tenant_id = $1 AND name = $2")
                    .bind(tenant.0)
                    .bind(&professional.name)
                    .fetch_one(&mut *tx)
                    .await?;
                let wanted: Vec<i64> = professional
                    .services
                    .iter()
                    .filter_map(|name| service_ids.iter().find(|(n, _)| n == name).map(|(_, id)| *id))
                    .collect();
                let current: Vec<i64> = sqlx::query_scalar(
                    "SELECT service_id FROM professional_services WHERE tenant_id = $1 AND professional_id = $2",
                )
                .bind(tenant.0)
                .bind(id)
                .fetch_all(&mut *tx)
                .await?;
                for service in wanted.iter().filter(|s| !current.contains(s)) {
                    sqlx::query("INSERT INTO professional_services (tenant_id, professional_id, service_id) VALUES ($1, $2, $3)")
                        .bind(tenant.0)
                        .bind(id)
                        .bind(service)
                        .execute(&mut *tx)
                        .await?;
                    changed = true;
                }
                for service in current.iter().filter(|s| !wanted.contains(s)) {
                    sqlx::query("DELETE FROM professional_services WHERE tenant_id = $1 AND professional_id = $2 AND service_id = $3")
                        .bind(tenant.0)
                        .bind(id)
                        .bind(service)
                        .execute(&mut *tx)
                        .await?;
                    changed = true;
                }
            }
            let active: Vec<(i64, String)> = sqlx::query_as("SELECT id, name FROM professionals WHERE tenant_id = $1 AND active")
                .bind(tenant.0)
                .fetch_all(&mut *tx)
                .await?;
            for (id, _) in active.iter().filter(|(_, name)| !catalog.professionals.iter().any(|p| &p.name == name)) {
                sqlx::query("UPDATE professionals SET active = FALSE WHERE tenant_id = $1 AND id = $2")
                    .bind(tenant.0)
                    .bind(id)
                    .execute(&mut *tx)
                    .await?;
                changed = true;
            }
            tx.commit().await?;
            Ok(changed)
        })
    }

    async fn catalog(&self, tenant: TenantId) -> StoreResult<(Vec<Service>, Vec<Professional>)> {
        let (services, professionals, links): (Vec<ServiceRow>, Vec<ProfessionalRow>, Vec<(i64, i64)>) = reading!(self, pool => {
            let services = sqlx::query_as(
                "SELECT id, name, duration_minutes, buffer_minutes, price_cents FROM services
                 WHERE tenant_id = $1 AND active ORDER BY id",
            )
            .bind(tenant.0)
            .fetch_all(pool)
            .await?;
            let professionals = sqlx::query_as(
                "SELECT id, name, hours, time_off FROM professionals WHERE tenant_id = $1 AND active ORDER BY id",
            )
            .bind(tenant.0)
            .fetch_all(pool)
            .await?;
            let links = sqlx::query_as(
                "SELECT professional_id, service_id FROM professional_services WHERE tenant_id = $1",
            )
            .bind(tenant.0)
            .fetch_all(pool)
            .await?;
            (services, professionals, links)
        });
        let services = services
            .into_iter()
            .map(|r| Service {
                id: r.id,
                name: r.name,
                duration_minutes: r.duration_minutes,
                buffer_minutes: r.buffer_minutes,
                price: Cents(r.price_cents),
            })
            .collect::<Vec<_>>();
        let professionals = professionals
            .into_iter()
            .map(|p| Professional {
                service_ids: links
                    .iter()
                    .filter(|(pro, s)| *pro == p.id && services.iter().any(|x| x.id == *s))
                    .map(|(_, s)| *s)
                    .collect(),
                id: p.id,
                name: p.name,
                hours: p.hours.0,
                time_off: p.time_off.0,
            })
            .collect();
        Ok((services, professionals))
    }

    async fn busy_blocks(
        &self,
        tenant: TenantId,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> StoreResult<Vec<(i64, DateTime<Utc>, DateTime<Utc>)>> {
        Ok(reading!(self, pool => {
            sqlx::query_as(
                "SELECT professional_id, starts_at, ends_at FROM appointments
                 WHERE tenant_id = $1 AND status IN ('held', 'confirmed') AND starts_at < $3 AND ends_at > $2",
            )
            .bind(tenant.0)
            .bind(from)
            .bind(to)
            .fetch_all(pool)
            .await
        })?)
    }

    async fn insert_appointment(
        &self,
        new: &NewAppointment<'_>,
        now: DateTime<Utc>,
    ) -> Result<Appointment, BookingError> {
        writing!(self, pool => {
            let mut tx = pool.begin_write().await.map_err(StoreError::from)?;
            let inserted: Option<Appointment> = sqlx::query_as(
                concat!("INSERT INTO appointments (tenant_id, contact_id, service_id, professional_id, starts_at, ends_at, status,
                                           price_cents, idempotency_key, created_at, updated_at)
                 VALUES ($1, $2, $3, $4, $5, $6, 'confirmed', $7, $8, $9, $9)
                 ON CONFLICT (tenant_id, idempotency_key) DO NOTHING
                 RETURNING ", appointment_columns!()),
            )
            .bind(new.tenant.0)
            .bind(new.contact.0)
            .bind(new.service_id)
            .bind(new.professional_id)
            .bind(new.starts_at)
            .bind(new.ends_at)
            .bind(new.price.0)
            .bind(new.key.as_str())
            .bind(now)
            .fetch_optional(&mut *tx)
            .await
            .map_err(overlap_or)?;
            let appointment = match inserted {
                Some(a) => a,
                None => sqlx::query_as(
                    concat!("SELECT ", appointment_columns!(), "
                     FROM appointments WHERE tenant_id = $1 AND idempotency_key = $2"),
                )
                .bind(new.tenant.0)
                .bind(new.key.as_str())
                .fetch_one(&mut *tx)
                .await
                .map_err(StoreError::from)?,
            };
            tx.commit().await.map_err(StoreError::from)?;
            Ok(appointment)
        })
    }

    async fn appointment(&self, tenant: TenantId, id: i64) -> StoreResult<Option<Appointment>> {
        Ok(reading!(self, pool => {
            sqlx::query_as(
                concat!("SELECT ", appointment_columns!(), "
                 FROM appointments WHERE tenant_id = $1 AND id = $2"),
            )
            .bind(tenant.0)
            .bind(id)
            .fetch_optional(pool)
            .await
        })?)
    }

    async fn appointment_by_key(&self, tenant: TenantId, key: &LedgerKey) -> StoreResult<Option<Appointment>> {
        Ok(reading!(self, pool => {
            sqlx::query_as(
                concat!("SELECT ", appointment_columns!(), "
                 FROM appointments WHERE tenant_id = $1 AND idempotency_key = $2"),
            )
            .bind(tenant.0)
            .bind(key.as_str())
            .fetch_optional(pool)
            .await
        })?)
    }

    async fn cancel_appointment(
        &self,
        tenant: TenantId,
        contact: ContactId,
        id: i64,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<Appointment>> {
        writing!(self, pool => {
            let mut tx = pool.begin_write().await?;
            let key: Option<Option<String>> = sqlx::query_scalar(
                "SELECT idempotency_key FROM appointments
                 WHERE tenant_id = $1 AND contact_id = $2 AND id = $3 AND status IN ('held', 'confirmed') AND starts_at > $4",
            )
            .bind(tenant.0)
            .bind(contact.0)
            .bind(id)
            .bind(now)
            .fetch_optional(&mut *tx)
            .await?;
            let Some(key) = key else {
                tx.rollback().await?;
                return Ok(None);
            };
            // The booking call that made it no longer holds: release its key, so the same
            // slot can be booked again and a repeat is not told "already booked".
            let cancelled: Option<Appointment> = sqlx::query_as(
                concat!("UPDATE appointments SET status = 'cancelled', idempotency_key = NULL, updated_at = $1
                 WHERE tenant_id = $2 AND contact_id = $3 AND id = $4 AND status IN ('held', 'confirmed')
                 RETURNING ", appointment_columns!()),
            )
            .bind(now)
            .bind(tenant.0)
            .bind(contact.0)
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?;
            if let Some(key) = key {
                sqlx::query(
                    "UPDATE agent_tool_executions SET status = 'superseded', updated_at = $1
                     WHERE tenant_id = $2 AND idempotency_key = $3 AND status = 'succeeded'",
                )
                .bind(now)
                .bind(tenant.0)
                .bind(key)
                .execute(&mut *tx)
                .await?;
            }
            tx.commit().await?;
            Ok(cancelled)
        })
    }

    async fn move_appointment(
        &self,
        tenant: TenantId,
        contact: ContactId,
        id: i64,
        (starts_at, ends_at): (DateTime<Utc>, DateTime<Utc>),
        now: DateTime<Utc>,
        move_tool: &str,
    ) -> Result<Option<Appointment>, BookingError> {
        writing!(self, pool => {
            let mut tx = pool.begin_write().await.map_err(StoreError::from)?;
            let moved: Option<Appointment> = sqlx::query_as(
                concat!("UPDATE appointments SET starts_at = $1, ends_at = $2, updated_at = $3
                 WHERE tenant_id = $4 AND contact_id = $5 AND id = $6 AND status IN ('held', 'confirmed')
                 RETURNING ", appointment_columns!()),
            )
            .bind(starts_at)
            .bind(ends_at)
            .bind(now)
            .bind(tenant.0)
            .bind(contact.0)
            .bind(id)
            .fetch_optional(&mut *tx)
            .await
            .map_err(overlap_or)?;
            if moved.is_some() {
                // Earlier moves of this booking no longer describe it: moving back to one of
                // those times later must run, not replay.
                sqlx::query(
                    "UPDATE agent_tool_executions SET status = 'superseded', updated_at = $1
                     WHERE tenant_id = $2 AND tool = $3 AND status = 'succeeded'
                       AND CAST(arguments ->> 'booking_id' AS BIGINT) = $4",
                )
                .bind(now)
                .bind(tenant.0)
                .bind(move_tool)
                .bind(id)
                .execute(&mut *tx)
                .await
                .map_err(StoreError::from)?;
            }
            tx.commit().await.map_err(StoreError::from)?;
            Ok(moved)
        })
    }

    async fn upcoming_appointments(
        &self,
        tenant: TenantId,
        contact: ContactId,
        from: DateTime<Utc>,
    ) -> StoreResult<Vec<Appointment>> {
        Ok(reading!(self, pool => {
            sqlx::query_as(
                concat!("SELECT ", appointment_columns!(), "
                 FROM appointments WHERE tenant_id = $1 AND contact_id = $2 AND status IN ('held', 'confirmed')
                   AND starts_at >= $3 ORDER BY starts_at"),
            )
            .bind(tenant.0)
            .bind(contact.0)
            .bind(from)
            .fetch_all(pool)
            .await
        })?)
    }

    async fn count_active_appointments(&self, tenant: TenantId) -> StoreResult<i64> {
        Ok(reading!(self, pool => {
            sqlx::query_scalar("SELECT COUNT(*) FROM appointments WHERE tenant_id = $1 AND status IN ('held', 'confirmed')")
                .bind(tenant.0)
                .fetch_one(pool)
                .await
        })?)
    }
}
