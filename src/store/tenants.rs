//! Tenants and their staff.

use chrono::{DateTime, Utc};

use super::{Dialect, Store, StoreError, StoreResult, reading, writing};
use crate::booking::BookingSettings;
use crate::domain::{PhoneE164, Secret, TenantId};
use crate::tenant::{ApplyOutcome, Staff, Tenant, TenantSettings, TenantSpec};
use sqlx::types::Json;

/// The columns of `TenantRow`.
macro_rules! tenant_columns {
    () => {
        "id, slug, name, timezone, phone_number_id, access_token, min_notice_minutes, horizon_days, slot_step_minutes, deposit_minutes, \
         settings"
    };
}

#[allow(async_fn_in_trait)]
pub trait TenantStore {
    /// Creates or updates the tenant named by `spec.slug`; applying the same spec twice
    /// changes nothing (not even `updated_at`).
    async fn apply_tenant(&self, spec: &TenantSpec, now: DateTime<Utc>) -> StoreResult<ApplyOutcome>;
    async fn tenant_by_phone_number_id(&self, phone_number_id: &str) -> StoreResult<Option<Tenant>>;
    async fn tenant_by_slug(&self, slug: &str) -> StoreResult<Option<Tenant>>;
    async fn tenant(&self, id: TenantId) -> StoreResult<Option<Tenant>>;
    async fn staff(&self, tenant: TenantId) -> StoreResult<Staff>;
    /// Whether a sender is one of the tenant's staff; one known only by a user id never is, and
    /// costs no read.
    async fn is_staff(&self, tenant: TenantId, wa_id: Option<&PhoneE164>) -> StoreResult<bool> {
        match wa_id {
            Some(_) => Ok(self.staff(tenant).await?.includes(wa_id)),
            None => Ok(false),
        }
    }
    async fn count_tenants(&self) -> StoreResult<i64>;
    /// The tenants that carry their own access token.
    async fn tenants_with_token(&self) -> StoreResult<std::collections::HashSet<TenantId>>;
    /// Whether any tenant carries its own access token (so it would send for real).
    async fn any_tenant_has_token(&self) -> StoreResult<bool>;
    /// The longest booking horizon of any tenant, in days.
    async fn max_horizon_days(&self) -> StoreResult<i64>;
}

#[derive(sqlx::FromRow)]
struct TenantRow {
    id: i64,
    slug: String,
    name: String,
    timezone: String,
    phone_number_id: String,
    access_token: Option<String>,
    min_notice_minutes: i64,
    horizon_days: i64,
    slot_step_minutes: i64,
    deposit_minutes: i64,
    settings: Json<TenantSettings>,
}

impl TryFrom<TenantRow> for Tenant {
    type Error = StoreError;
    fn try_from(row: TenantRow) -> Result<Self, StoreError> {
        let timezone = row
            .timezone
            .parse()
            .map_err(|_| StoreError::Corrupt(format!("tenant {} has time zone {:?}", row.slug, row.timezone)))?;
        Ok(Tenant {
            id: TenantId(row.id),
            slug: row.slug,
            name: row.name,
            timezone,
            phone_number_id: row.phone_number_id,
            access_token: row.access_token.map(Secret::new),
            booking: BookingSettings {
                min_notice_minutes: row.min_notice_minutes.try_into().unwrap_or(0),
                horizon_days: row.horizon_days.try_into().unwrap_or(0),
                slot_step_minutes: row.slot_step_minutes.try_into().unwrap_or(30),
                deposit_minutes: row.deposit_minutes.try_into().unwrap_or(30),
            },
            settings: row.settings.0,
        })
    }
}

impl TenantStore for Store {
    async fn apply_tenant(&self, spec: &TenantSpec, now: DateTime<Utc>) -> StoreResult<ApplyOutcome> {
        writing!(self, pool => {
            let mut tx = pool.begin_write().await?;
            let existing: Option<i64> = sqlx::query_scalar("SELECT id FROM tenants WHERE slug = $1")
                .bind(&spec.slug)
                .fetch_optional(&mut *tx)
                .await?;
            let changed: Option<i64> = sqlx::query_scalar(
                "INSERT INTO tenants (slug, name, timezone, phone_number_id, access_token, settings, created_at, updated_at)
                 VALUES ($1, $2, $3, $4, $5, $7, $6, $6)
                 ON CONFLICT (slug) DO UPDATE SET
                     name = excluded.name, timezone = excluded.timezone,
                     phone_number_id = excluded.phone_number_id, access_token = excluded.access_token,
                     settings = excluded.settings, updated_at = excluded.updated_at
                 WHERE tenants.name <> excluded.name OR tenants.timezone <> excluded.timezone
                    OR tenants.phone_number_id <> excluded.phone_number_id
                    OR COALESCE(tenants.access_token, '') <> COALESCE(excluded.access_token, '')
                    OR tenants.settings <> excluded.settings
                 RETURNING id",
            )
            .bind(&spec.slug)
            .bind(&spec.name)
            .bind(spec.timezone.name())
            .bind(&spec.phone_number_id)
            .bind(spec.access_token.as_ref().map(Secret::expose))
            .bind(now)
            .bind(Json(&spec.settings))
            .fetch_optional(&mut *tx)
            .await
            .map_err(|e| match e {
                sqlx::Error::Database(db) if db.is_unique_violation() => StoreError::Conflict(format!(
                    "phone_number_id {} already belongs to another tenant",
                    spec.phone_number_id
                )),
                other => other.into(),
            })?;
            let id = match (existing, changed) {
                (Some(id), _) | (None, Some(id)) => id,
                (None, None) => return Err(StoreError::Corrupt("tenant upsert returned nothing".into())),
            };

            let current: Vec<String> = sqlx::query_scalar("SELECT phone FROM staff WHERE tenant_id = $1")
                .bind(id)
                .fetch_all(&mut *tx)
                .await?;
            let wanted: Vec<&str> = spec.staff.iter().map(PhoneE164::as_str).collect();
            let mut staff_changed = false;
            for phone in current.iter().filter(|p| !wanted.contains(&p.as_str())) {
                sqlx::query("DELETE FROM staff WHERE tenant_id = $1 AND phone = $2")
                    .bind(id)
                    .bind(phone)
                    .execute(&mut *tx)
                    .await?;
                staff_changed = true;
            }
            for phone in wanted.iter().filter(|p| !current.iter().any(|c| c == *p)) {
                sqlx::query("INSERT INTO staff (tenant_id, phone, created_at) VALUES ($1, $2, $3)")
                    .bind(id)
                    .bind(*phone)
                    .bind(now)
                    .execute(&mut *tx)
                    .await?;
                staff_changed = true;
            }
            tx.commit().await?;
            let id = TenantId(id);
            Ok(match (existing, changed.is_some() || staff_changed) {
                (None, _) => ApplyOutcome::Created(id),
                (Some(_), true) => ApplyOutcome::Updated(id),
                (Some(_), false) => ApplyOutcome::Unchanged(id),
            })
        })
    }

    async fn tenant_by_phone_number_id(&self, phone_number_id: &str) -> StoreResult<Option<Tenant>> {
        let row: Option<TenantRow> = reading!(self, pool => {
            sqlx::query_as(
                concat!("SELECT ", tenant_columns!(), " FROM tenants WHERE phone_number_id = $1"),
            )
            .bind(phone_number_id)
            .fetch_optional(pool)
            .await
        })?;
        row.map(Tenant::try_from).transpose()
    }

    async fn tenant_by_slug(&self, slug: &str) -> StoreResult<Option<Tenant>> {
        let row: Option<TenantRow> = reading!(self, pool => {
            sqlx::query_as(concat!("SELECT ", tenant_columns!(), " FROM tenants WHERE slug = $1"))
                .bind(slug)
                .fetch_optional(pool)
                .await
        })?;
        row.map(Tenant::try_from).transpose()
    }

    async fn tenant(&self, id: TenantId) -> StoreResult<Option<Tenant>> {
        let row: Option<TenantRow> = reading!(self, pool => {
            sqlx::query_as(concat!("SELECT ", tenant_columns!(), " FROM tenants WHERE id = $1"))
                .bind(id.0)
                .fetch_optional(pool)
                .await
        })?;
        row.map(Tenant::try_from).transpose()
    }

    async fn staff(&self, tenant: TenantId) -> StoreResult<Staff> {
        let phones: Vec<String> = reading!(self, pool => {
            sqlx::query_scalar("SELECT phone FROM staff WHERE tenant_id = $1 ORDER BY phone")
                .bind(tenant.0)
                .fetch_all(pool)
                .await
        })?;
        let phones = phones.into_iter().map(|p| PhoneE164::parse(&p).map_err(|e| StoreError::Corrupt(e.to_string())));
        Ok(Staff::new(phones.collect::<StoreResult<_>>()?))
    }

    async fn count_tenants(&self) -> StoreResult<i64> {
        Ok(reading!(self, pool => { sqlx::query_scalar("SELECT COUNT(*) FROM tenants").fetch_one(pool).await })?)
    }

    async fn tenants_with_token(&self) -> StoreResult<std::collections::HashSet<TenantId>> {
        let ids: Vec<i64> = reading!(self, pool => {
            sqlx::query_scalar("SELECT id FROM tenants WHERE access_token IS NOT NULL AND access_token <> ''")
                .fetch_all(pool)
                .await
        })?;
        Ok(ids.into_iter().map(TenantId).collect())
    }

    async fn any_tenant_has_token(&self) -> StoreResult<bool> {
        let n: i64 = reading!(self, pool => {
            sqlx::query_scalar("SELECT COUNT(*) FROM tenants WHERE access_token IS NOT NULL AND access_token <> ''")
                .fetch_one(pool)
                .await
        })?;
        Ok(n > 0)
    }

    async fn max_horizon_days(&self) -> StoreResult<i64> {
        let days: Option<i64> = reading!(self, pool => {
            sqlx::query_scalar("SELECT MAX(horizon_days) FROM tenants").fetch_one(pool).await
        })?;
        Ok(days.unwrap_or(0))
    }
}
