//! The console's people: admins, the tenants each may see, their sessions (tower-sessions'
//! records, kept on the same database as everything else) and failed logins.
//!
//! Invariant: an admin reaches a tenant only through `admin_tenants`; every console query
//! takes the tenant id resolved from that membership.

use chrono::{DateTime, Utc};

use super::{Dialect, Store, StoreResult, changed_one, reading, writing};
use crate::domain::TenantId;

/// An admin as stored (their tenants are read apart).
#[derive(Clone)]
pub struct AdminRecord {
    pub id: i64,
    pub email: String,
    pub password_hash: String,
}

/// The password hash stays out of logs.
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
    /// Records a login attempt and returns how many attempts `email` has made since `since`
    /// without a success in between ([`Self::clear_login_attempts`] at success).
    async fn record_login_attempt(&self, email: &str, now: DateTime<Utc>, since: DateTime<Utc>) -> StoreResult<i64>;
    async fn clear_login_attempts(&self, email: &str) -> StoreResult<()>;
    async fn session_load(&self, id: &str, now: DateTime<Utc>) -> StoreResult<Option<Vec<u8>>>;
    /// Inserts or replaces the record; `insert_only` fails (returns false) on an existing id.
    async fn session_save(&self, id: &str, data: &[u8], expiry: DateTime<Utc>, insert_only: bool) -> StoreResult<bool>;
    async fn session_delete(&self, id: &str) -> StoreResult<()>;
    /// Deletes expired sessions (returns how many) and day-old login attempts.
    async fn session_prune(&self, now: DateTime<Utc>) -> StoreResult<u64>;
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
        let row: Option<(i64, String, String)> = reading!(self, pool => {
            sqlx::query_as("SELECT id, email, password_hash FROM admins WHERE email = $1")
                .bind(email)
                .fetch_optional(pool)
                .await
        })?;
        Ok(row.map(|(id, email, password_hash)| AdminRecord { id, email, password_hash }))
    }

    async fn admin_by_id(&self, id: i64) -> StoreResult<Option<AdminRecord>> {
        let row: Option<(i64, String, String)> = reading!(self, pool => {
            sqlx::query_as("SELECT id, email, password_hash FROM admins WHERE id = $1")
                .bind(id)
                .fetch_optional(pool)
                .await
        })?;
        Ok(row.map(|(id, email, password_hash)| AdminRecord { id, email, password_hash }))
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

    async fn record_login_attempt(&self, email: &str, now: DateTime<Utc>, since: DateTime<Utc>) -> StoreResult<i64> {
        writing!(self, pool => {
            let mut tx = pool.begin_write().await?;
            // Attempts on one email are counted one at a time (SQLite's writer already is).
            sqlx::query(pool.pick("SELECT $1", "SELECT pg_advisory_xact_lock(hashtext($1))"))
                .bind(email)
                .execute(&mut *tx)
                .await?;
            // Old failures are no longer counted: drop them here rather than in a sweep.
            sqlx::query("DELETE FROM login_failures WHERE email = $1 AND failed_at < $2")
                .bind(email)
                .bind(since)
                .execute(&mut *tx)
                .await?;
            sqlx::query("INSERT INTO login_failures (email, failed_at) VALUES ($1, $2)")
                .bind(email)
                .bind(now)
                .execute(&mut *tx)
                .await?;
            let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM login_failures WHERE email = $1 AND failed_at >= $2")
                .bind(email)
                .bind(since)
                .fetch_one(&mut *tx)
                .await?;
            tx.commit().await?;
            Ok(n)
        })
    }

    async fn clear_login_attempts(&self, email: &str) -> StoreResult<()> {
        writing!(self, pool => {
            sqlx::query("DELETE FROM login_failures WHERE email = $1").bind(email).execute(pool).await?;
            Ok(())
        })
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
            // Login attempts older than any throttle window count for nothing.
            sqlx::query("DELETE FROM login_failures WHERE failed_at < $1")
                .bind(now - chrono::TimeDelta::days(1))
                .execute(pool)
                .await?;
            Ok(done.rows_affected())
        })
    }
}
