//! Failed console logins, kept by e-mail and by source address so the throttle
//! (`crate::http::console::throttle`) can slow a guesser without locking the owner out; and
//! wrong codes of the second factor behind a right password, kept per admin.
//!
//! Under a lock per e-mail and per source, an attempt's failures are tallied and, unless the
//! throttle refuses it (a refused attempt is never written, so it never counts), it is written
//! as a failure before its password is checked, so parallel guesses see each other; a success
//! forgets it.

use chrono::{DateTime, Utc};

use super::{Dialect, Store, StoreResult, writing};

/// Failures of one kind since the window's start.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, sqlx::FromRow)]
pub struct Tally {
    pub count: i64,
    pub last: Option<DateTime<Utc>>,
}

/// The failures an attempt is judged by, its own excluded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LoginFailures {
    /// This e-mail from this source.
    pub pair: Tally,
    /// This source, any e-mail.
    pub source: Tally,
    /// This e-mail, any source.
    pub email: Tally,
}

#[allow(async_fn_in_trait)]
pub trait LoginStore {
    /// Tallies the failures since `since` and, unless `refuse` says so, writes the attempt as
    /// failed (until [`Self::forget_login_attempt`]): `Ok(row)`, or `Err(failures)` refused.
    async fn begin_login_attempt(
        &self,
        email: &str,
        source: &str,
        now: DateTime<Utc>,
        since: DateTime<Utc>,
        refuse: &(dyn Fn(&LoginFailures) -> bool + Send + Sync),
    ) -> StoreResult<Result<i64, LoginFailures>>;
    async fn forget_login_attempt(&self, id: i64) -> StoreResult<()>;
    /// After a success: this e-mail's failures from this source.
    async fn clear_login_failures(&self, email: &str, source: &str) -> StoreResult<()>;
    /// A code for admin `admin`'s second factor, behind a right password: tallies their wrong
    /// codes since `since` (from any source) and, unless `refuse` says so, writes this attempt
    /// as wrong (until [`Self::forget_totp_attempt`]): `Ok((row, tally))`, or `Err(tally)`.
    async fn begin_totp_attempt(
        &self,
        admin: i64,
        source: &str,
        now: DateTime<Utc>,
        since: DateTime<Utc>,
        refuse: &(dyn Fn(&Tally) -> bool + Send + Sync),
    ) -> StoreResult<Result<(i64, Tally), Tally>>;
    async fn forget_totp_attempt(&self, id: i64) -> StoreResult<()>;
    /// Records a login of `admin` at `now`; the wrong codes typed behind their password since
    /// the login before (or ever, for a first login).
    async fn record_login(&self, admin: i64, now: DateTime<Utc>) -> StoreResult<Tally>;
}

/// One tally over `login_failures`.
macro_rules! tally {
    ($tx:ident, $filter:literal, $email:expr, $source:expr, $since:expr) => {
        sqlx::query_as::<_, Tally>(concat!(
            "SELECT COUNT(*) AS count, MAX(failed_at) AS last FROM login_failures WHERE ",
            $filter,
            " AND failed_at >= $3"
        ))
        .bind($email)
        .bind($source)
        .bind($since)
        .fetch_one(&mut *$tx)
        .await?
    };
}

impl LoginStore for Store {
    async fn begin_login_attempt(
        &self,
        email: &str,
        source: &str,
        now: DateTime<Utc>,
        since: DateTime<Utc>,
        refuse: &(dyn Fn(&LoginFailures) -> bool + Send + Sync),
    ) -> StoreResult<Result<i64, LoginFailures>> {
        writing!(self, pool => {
            let mut tx = pool.begin_write().await?;
            // One attempt at a time per e-mail and per source (SQLite's writer already is);
            // two key spaces, so an e-mail and an address never share a lock.
            for (space, key) in [(1, email), (2, source)] {
                sqlx::query(pool.pick("SELECT $1, $2", "SELECT pg_advisory_xact_lock($1, hashtext($2))"))
                    .bind(space)
                    .bind(key)
                    .execute(&mut *tx)
                    .await?;
            }
            let failures = LoginFailures {
                pair: tally!(tx, "email = $1 AND source = $2", email, source, since),
                source: tally!(tx, "($1 = $1) AND source = $2", email, source, since),
                email: tally!(tx, "email = $1 AND ($2 = $2)", email, source, since),
            };
            if refuse(&failures) {
                tx.rollback().await?;
                return Ok(Err(failures));
            }
            let id: i64 =
                sqlx::query_scalar("INSERT INTO login_failures (email, source, failed_at) VALUES ($1, $2, $3) RETURNING id")
                    .bind(email)
                    .bind(source)
                    .bind(now)
                    .fetch_one(&mut *tx)
                    .await?;
            tx.commit().await?;
            Ok(Ok(id))
        })
    }

    async fn forget_login_attempt(&self, id: i64) -> StoreResult<()> {
        writing!(self, pool => {
            sqlx::query("DELETE FROM login_failures WHERE id = $1").bind(id).execute(pool).await?;
            Ok(())
        })
    }

    async fn begin_totp_attempt(
        &self,
        admin: i64,
        source: &str,
        now: DateTime<Utc>,
        since: DateTime<Utc>,
        refuse: &(dyn Fn(&Tally) -> bool + Send + Sync),
    ) -> StoreResult<Result<(i64, Tally), Tally>> {
        writing!(self, pool => {
            let mut tx = pool.begin_write().await?;
            // One code at a time per admin, whatever its source (SQLite's writer already is).
            sqlx::query(pool.pick("SELECT $1", "SELECT pg_advisory_xact_lock(3, $1::int)"))
                .bind(admin)
                .execute(&mut *tx)
                .await?;
            let tally: Tally = sqlx::query_as(
                "SELECT COUNT(*) AS count, MAX(failed_at) AS last FROM totp_failures WHERE admin_id = $1 AND failed_at >= $2",
            )
            .bind(admin)
            .bind(since)
            .fetch_one(&mut *tx)
            .await?;
            if refuse(&tally) {
                tx.rollback().await?;
                return Ok(Err(tally));
            }
            let id: i64 = sqlx::query_scalar(
                "INSERT INTO totp_failures (admin_id, source, failed_at) VALUES ($1, $2, $3) RETURNING id",
            )
            .bind(admin)
            .bind(source)
            .bind(now)
            .fetch_one(&mut *tx)
            .await?;
            tx.commit().await?;
            Ok(Ok((id, tally)))
        })
    }

    async fn forget_totp_attempt(&self, id: i64) -> StoreResult<()> {
        writing!(self, pool => {
            sqlx::query("DELETE FROM totp_failures WHERE id = $1").bind(id).execute(pool).await?;
            Ok(())
        })
    }

    async fn record_login(&self, admin: i64, now: DateTime<Utc>) -> StoreResult<Tally> {
        writing!(self, pool => {
            let mut tx = pool.begin_write().await?;
            let tally: Tally = sqlx::query_as(
                "SELECT COUNT(*) AS count, MAX(f.failed_at) AS last FROM totp_failures f JOIN admins a ON a.id = f.admin_id
                 WHERE f.admin_id = $1 AND (a.last_login_at IS NULL OR f.failed_at > a.last_login_at)",
            )
            .bind(admin)
            .fetch_one(&mut *tx)
            .await?;
            sqlx::query("UPDATE admins SET last_login_at = $1 WHERE id = $2").bind(now).bind(admin).execute(&mut *tx).await?;
            tx.commit().await?;
            Ok(tally)
        })
    }

    async fn clear_login_failures(&self, email: &str, source: &str) -> StoreResult<()> {
        writing!(self, pool => {
            sqlx::query("DELETE FROM login_failures WHERE email = $1 AND source = $2")
                .bind(email)
                .bind(source)
                .execute(pool)
                .await?;
            Ok(())
        })
    }
}
