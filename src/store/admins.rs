//! The console's people: admins, the tenants each may see, their sessions (tower-sessions'
//! records, kept on the same database as everything else) and failed logins.
//!
//! Invariant: an admin reaches a tenant only through `admin_tenants`; every console query
//! takes the tenant id resolved from that membership.

use chrono::{DateTime, Utc};

use super::{Dialect, Store, StoreResult, changed_one, reading, writing};
use crate::domain::TenantId;

/// An admin as stored (their tenants are read apart).
#[derive(Clone, sqlx::FromRow)]
pub struct AdminRecord {
    pub id: i64,
    pub email: String,
    pub password_hash: String,
    /// The TOTP secret (base32), when the admin turned the second factor on.
    pub totp_secret: Option<String>,
    /// The staff number this admin is, if they gave one (`balcao admin add --phone`).
    pub phone: Option<String>,
    /// Their last login, if any.
    pub last_login_at: Option<DateTime<Utc>>,
}

/// The password hash and the TOTP secret stay out of logs.
impl std::fmt::Debug for AdminRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdminRecord").field("id", &self.id).field("email", &self.email).finish_non_exhaustive()
    }
}

/// A tenant as the console's navigation names it.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct TenantRef {
    pub id: i64,
    pub slug: String,
    pub name: String,
}

impl TenantRef {
    pub fn tenant_id(&self) -> TenantId {
        TenantId(self.id)
    }
}

#[allow(async_fn_in_trait)]
pub trait AdminStore {
    /// Creates the admin or replaces their password, and adds the membership of `tenant`.
    async fn upsert_admin(
        &self,
        email: &str,
        password_hash: &str,
        tenant: TenantId,
        now: DateTime<Utc>,
    ) -> StoreResult<i64>;
    async fn admin_by_email(&self, email: &str) -> StoreResult<Option<AdminRecord>>;
    async fn admin_by_id(&self, id: i64) -> StoreResult<Option<AdminRecord>>;
    async fn admin_tenants(&self, admin: i64) -> StoreResult<Vec<TenantRef>>;
    /// Sets or clears (`None`) the staff number the admin is; `false` when there is no such admin.
    async fn set_admin_phone(&self, email: &str, phone: Option<&str>, now: DateTime<Utc>) -> StoreResult<bool>;
    /// Sets or clears (`None`) the admin's TOTP secret; `false` when there is no such admin.
    async fn set_totp_secret(&self, email: &str, secret: Option<&str>, now: DateTime<Utc>) -> StoreResult<bool>;
    /// Spends TOTP time step `step` for the admin: `false` when that step or a later one was
    /// used already (a code works once).
    async fn use_totp_step(&self, admin: i64, step: i64) -> StoreResult<bool>;
    async fn session_load(&self, id: &str, now: DateTime<Utc>) -> StoreResult<Option<Vec<u8>>>;
    /// Inserts or replaces the record; `insert_only` fails (returns false) on an existing id.
    async fn session_save(&self, id: &str, data: &[u8], expiry: DateTime<Utc>, insert_only: bool) -> StoreResult<bool>;
    async fn session_delete(&self, id: &str) -> StoreResult<()>;
    /// Deletes expired sessions (returns how many) and day-old login attempts.
    async fn session_prune(&self, now: DateTime<Utc>) -> StoreResult<u64>;
}

/// The columns of an [`AdminRecord`].
macro_rules! admin_columns {
    () => {
        "id, email, password_hash, totp_secret, phone, last_login_at"
    };
}

impl AdminStore for Store {
    async fn upsert_admin(
        &self,
        email: &str,
        password_hash: &str,
        tenant: TenantId,
        now: DateTime<Utc>,
    ) -> StoreResult<i64> {
        writing!(self, pool => {
            let mut tx = pool.begin_write().await?;
            let id: i64 = sqlx::query_scalar(
                "INSERT INTO admins (email, password_hash, created_at, updated_at) VALUES ($1, $2, $3, $3) \
                 ON CONFLICT (email) DO UPDATE SET password_hash = excluded.password_hash, updated_at = excluded.updated_at \
                 RETURNING id",
            )
            .bind(email)
            .bind(password_hash)
            .bind(now)
            .fetch_one(&mut *tx)
            .await?;
            // Codes guessed behind the old password say nothing about the new one.
            sqlx::query("DELETE FROM totp_failures WHERE admin_id = $1").bind(id).execute(&mut *tx).await?;
            sqlx::query("INSERT INTO admin_tenants (admin_id, tenant_id) VALUES ($1, $2) ON CONFLICT DO NOTHING")
                .bind(id)
                .bind(tenant.0)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            Ok(id)
        })
    }

    async fn admin_by_email(&self, email: &str) -> StoreResult<Option<AdminRecord>> {
        Ok(reading!(self, pool => {
            sqlx::query_as(concat!("SELECT ", admin_columns!(), " FROM admins WHERE email = $1"))
                .bind(email)
                .fetch_optional(pool)
                .await
        })?)
    }

    async fn admin_by_id(&self, id: i64) -> StoreResult<Option<AdminRecord>> {
        Ok(reading!(self, pool => {
            sqlx::query_as(concat!("SELECT ", admin_columns!(), " FROM admins WHERE id = $1"))
                .bind(id)
                .fetch_optional(pool)
                .await
        })?)
    }

    async fn admin_tenants(&self, admin: i64) -> StoreResult<Vec<TenantRef>> {
        Ok(reading!(self, pool => {
            sqlx::query_as(
                "SELECT t.id, t.slug, t.name FROM admin_tenants m JOIN tenants t ON t.id = m.tenant_id \
                 WHERE m.admin_id = $1 ORDER BY t.slug",
            )
            .bind(admin)
            .fetch_all(pool)
            .await
        })?)
    }

    async fn set_admin_phone(&self, email: &str, phone: Option<&str>, now: DateTime<Utc>) -> StoreResult<bool> {
        Ok(writing!(self, pool => {
            sqlx::query("UPDATE admins SET phone = $1, updated_at = $2 WHERE email = $3")
                .bind(phone)
                .bind(now)
                .bind(email)
                .execute(pool)
                .await
                .map(changed_one)
        })?)
    }

    async fn set_totp_secret(&self, email: &str, secret: Option<&str>, now: DateTime<Utc>) -> StoreResult<bool> {
        Ok(writing!(self, pool => {
            sqlx::query(
                "UPDATE admins SET totp_secret = $1, totp_last_step = NULL, updated_at = $2 WHERE email = $3",
            )
            .bind(secret)
            .bind(now)
            .bind(email)
            .execute(pool)
            .await
            .map(changed_one)
        })?)
    }

    async fn use_totp_step(&self, admin: i64, step: i64) -> StoreResult<bool> {
        Ok(writing!(self, pool => {
            sqlx::query(
                "UPDATE admins SET totp_last_step = $1
                 WHERE id = $2 AND (totp_last_step IS NULL OR totp_last_step < $1)",
            )
            .bind(step)
            .bind(admin)
            .execute(pool)
            .await
            .map(changed_one)
        })?)
    }

    async fn session_load(&self, id: &str, now: DateTime<Utc>) -> StoreResult<Option<Vec<u8>>> {
        Ok(reading!(self, pool => {
            sqlx::query_scalar("SELECT data FROM console_sessions WHERE id = $1 AND expiry_date > $2")
                .bind(id)
                .bind(now)
                .fetch_optional(pool)
                .await
        })?)
    }

    async fn session_save(&self, id: &str, data: &[u8], expiry: DateTime<Utc>, insert_only: bool) -> StoreResult<bool> {
        writing!(self, pool => {
            let sql = if insert_only {
                "INSERT INTO console_sessions (id, data, expiry_date) VALUES ($1, $2, $3) ON CONFLICT (id) DO NOTHING"
            } else {
                "INSERT INTO console_sessions (id, data, expiry_date) VALUES ($1, $2, $3) \
                 ON CONFLICT (id) DO UPDATE SET data = excluded.data, expiry_date = excluded.expiry_date"
            };
            let done = sqlx::query(sql).bind(id).bind(data).bind(expiry).execute(pool).await?;
            Ok(changed_one(done))
        })
    }

    async fn session_delete(&self, id: &str) -> StoreResult<()> {
        writing!(self, pool => {
            sqlx::query("DELETE FROM console_sessions WHERE id = $1").bind(id).execute(pool).await?;
            Ok(())
        })
    }

    async fn session_prune(&self, now: DateTime<Utc>) -> StoreResult<u64> {
        writing!(self, pool => {
            let done = sqlx::query("DELETE FROM console_sessions WHERE expiry_date <= $1").bind(now).execute(pool).await?;
            // Login attempts older than any throttle window count for nothing; wrong codes are
            // kept a while longer, for the owner's notice.
            sqlx::query("DELETE FROM login_failures WHERE failed_at < $1")
                .bind(now - chrono::TimeDelta::days(1))
                .execute(pool)
                .await?;
            sqlx::query("DELETE FROM totp_failures WHERE failed_at < $1")
                .bind(now - chrono::TimeDelta::days(30))
                .execute(pool)
                .await?;
            Ok(done.rows_affected())
        })
    }
}
