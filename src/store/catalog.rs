//! The catalog's statements: services, professionals, who does what, and the tenant's booking
//! settings, applied from the tenant file.

use chrono::NaiveDateTime;
use sqlx::types::Json;

use super::{Dialect, Store, StoreResult, reading, writing};
use crate::booking::{CatalogSpec, Professional, Service, WeeklyHours};
use crate::domain::{Cents, TenantId};

#[allow(async_fn_in_trait)]
pub trait CatalogStore {
    /// Makes the stored catalog match the file: upserts by name, deactivates what is gone
    /// (ids stay stable for existing appointments). Returns whether anything changed.
    async fn apply_catalog(&self, tenant: TenantId, catalog: &CatalogSpec) -> StoreResult<bool>;
    /// Active services and professionals.
    async fn catalog(&self, tenant: TenantId) -> StoreResult<(Vec<Service>, Vec<Professional>)>;
}

#[derive(sqlx::FromRow)]
struct ServiceRow {
    id: i64,
    name: String,
    duration_minutes: i64,
    buffer_minutes: i64,
    price_cents: i64,
    deposit_cents: i64,
}

#[derive(sqlx::FromRow)]
struct ProfessionalRow {
    id: i64,
    name: String,
    hours: Json<WeeklyHours>,
    time_off: Json<Vec<(NaiveDateTime, NaiveDateTime)>>,
}

/// Inside the apply's transaction: deactivates the active rows of `$table` (services or
/// professionals) whose name the tenant file no longer lists; true when it deactivated any.
/// Rows are kept, not deleted: appointments point at them.
macro_rules! deactivate_unlisted {
    ($tx:expr, $table:literal, $tenant:expr, $listed:expr) => {{
        let active: Vec<(i64, String)> =
            sqlx::query_as(concat!("SELECT id, name FROM ", $table, " WHERE tenant_id = $1 AND active"))
                .bind($tenant.0)
                .fetch_all(&mut *$tx)
                .await?;
        let mut deactivated = false;
        for (id, _) in active.iter().filter(|(_, name)| !$listed.contains(&name.as_str())) {
            sqlx::query(concat!("UPDATE ", $table, " SET active = FALSE WHERE tenant_id = $1 AND id = $2"))
                .bind($tenant.0)
                .bind(id)
                .execute(&mut *$tx)
                .await?;
            deactivated = true;
        }
        deactivated
    }};
}

impl CatalogStore for Store {
    async fn apply_catalog(&self, tenant: TenantId, catalog: &CatalogSpec) -> StoreResult<bool> {
        writing!(self, pool => {
            let mut tx = pool.begin_write().await?;
            let s = &catalog.settings;
            let mut changed = sqlx::query(
                "UPDATE tenants SET min_notice_minutes = $1, horizon_days = $2, slot_step_minutes = $3, deposit_minutes = $5
                 WHERE id = $4 AND (min_notice_minutes <> $1 OR horizon_days <> $2 OR slot_step_minutes <> $3
                                    OR deposit_minutes <> $5)",
            )
            .bind(i64::from(s.min_notice_minutes))
            .bind(i64::from(s.horizon_days))
            .bind(i64::from(s.slot_step_minutes))
            .bind(tenant.0)
            .bind(i64::from(s.deposit_minutes))
            .execute(&mut *tx)
            .await?
            .rows_affected()
                > 0;

            let mut service_ids = Vec::new();
            for service in &catalog.services {
                let touched = sqlx::query(
                    "INSERT INTO services (tenant_id, name, duration_minutes, buffer_minutes, price_cents, deposit_cents, active)
                     VALUES ($1, $2, $3, $4, $5, $6, TRUE)
                     ON CONFLICT (tenant_id, name) DO UPDATE SET
                         duration_minutes = excluded.duration_minutes, buffer_minutes = excluded.buffer_minutes,
                         price_cents = excluded.price_cents, deposit_cents = excluded.deposit_cents, active = TRUE
                     WHERE services.duration_minutes <> excluded.duration_minutes
                        OR services.buffer_minutes <> excluded.buffer_minutes
                        OR services.price_cents <> excluded.price_cents
                        OR services.deposit_cents <> excluded.deposit_cents OR NOT services.active",
                )
                .bind(tenant.0)
                .bind(&service.name)
                .bind(i64::from(service.duration_minutes))
                .bind(i64::from(service.buffer_minutes))
                .bind(service.price.0)
                .bind(service.deposit.0)
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
            let listed: Vec<&str> = catalog.services.iter().map(|s| s.name.as_str()).collect();
            changed |= deactivate_unlisted!(tx, "services", tenant, &listed);

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
            let listed: Vec<&str> = catalog.professionals.iter().map(|p| p.name.as_str()).collect();
            changed |= deactivate_unlisted!(tx, "professionals", tenant, &listed);
            tx.commit().await?;
            Ok(changed)
        })
    }

    async fn catalog(&self, tenant: TenantId) -> StoreResult<(Vec<Service>, Vec<Professional>)> {
        let (services, professionals, links): (Vec<ServiceRow>, Vec<ProfessionalRow>, Vec<(i64, i64)>) = reading!(self, pool => {
            let services = sqlx::query_as(
                "SELECT id, name, duration_minutes, buffer_minutes, price_cents, deposit_cents FROM services
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
                deposit: Cents(r.deposit_cents),
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
}
