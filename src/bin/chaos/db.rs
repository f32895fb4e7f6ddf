//! The campaign's own view of the database: plain reads of the tables the invariants are
//! stated on, on either backend (one SQL text; `$n` parameters work on both), and the one write
//! it makes (aging a proposal past its expiry).

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};
use std::str::FromStr;

pub enum Db {
    Sqlite(sqlx::SqlitePool),
    Postgres(sqlx::PgPool),
}

/// Runs `$body` with `$pool` bound to whichever pool `$db` holds.
macro_rules! on {
    ($db:expr, $pool:ident => $body:expr) => {
        match $db {
            $crate::db::Db::Sqlite($pool) => $body,
            $crate::db::Db::Postgres($pool) => $body,
        }
    };
}
pub(crate) use on;

/// The `application_name` of the campaign's own PostgreSQL connections: killing the servers'
/// connections spares them.
pub const CAMPAIGN: &str = "chaos";

impl Db {
    pub async fn connect(url: &str) -> anyhow::Result<Self> {
        Ok(if url.starts_with("postgres") {
            let options = PgConnectOptions::from_str(url)?.application_name(CAMPAIGN);
            Db::Postgres(PgPoolOptions::new().max_connections(4).connect_with(options).await?)
        } else {
            Db::Sqlite(
                SqlitePoolOptions::new().max_connections(4).connect_with(SqliteConnectOptions::from_str(url)?).await?,
            )
        })
    }

    /// Vacuums the campaign's PostgreSQL database every `period` when the server's autovacuum is
    /// off (as on the CI host): a long campaign otherwise piles up millions of dead job and outbox
    /// rows, the planner's estimates go stale, and the runs measure a neglected database rather
    /// than Balcão. With autovacuum on, the server does this itself and nothing is started.
    pub async fn vacuum_every(
        &self,
        period: std::time::Duration,
    ) -> anyhow::Result<Option<tokio::task::JoinHandle<()>>> {
        let Db::Postgres(pool) = self else { return Ok(None) };
        let setting: String = sqlx::query_scalar("SHOW autovacuum").fetch_one(pool).await?;
        if setting != "off" {
            return Ok(None);
        }
        println!("autovacuum is off on this server: the campaign vacuums its database every {period:?}");
        let pool = pool.clone();
        Ok(Some(tokio::spawn(async move {
            let mut every = tokio::time::interval(period);
            every.tick().await;
            loop {
                every.tick().await;
                if let Err(e) = sqlx::raw_sql("VACUUM (ANALYZE)").execute(&pool).await {
                    eprintln!("chaos: vacuum: {e}");
                }
            }
        })))
    }

    /// One statement that changes rows of a tenant.
    pub async fn execute(&self, sql: &str, tenant: i64) -> anyhow::Result<u64> {
        Ok(on!(self, pool => sqlx::query(sqlx::AssertSqlSafe(sql)).bind(tenant).execute(pool).await?.rows_affected()))
    }

    /// One count, for a tenant.
    pub async fn count(&self, sql: &str, tenant: i64) -> anyhow::Result<i64> {
        Ok(on!(self, pool => sqlx::query_scalar(sqlx::AssertSqlSafe(sql)).bind(tenant).fetch_one(pool).await?))
    }

    /// One line of text, for a tenant (diagnostics).
    pub async fn text(&self, sql: &str, tenant: i64) -> anyhow::Result<String> {
        Ok(on!(self, pool => sqlx::query_scalar(sqlx::AssertSqlSafe(sql)).bind(tenant).fetch_one(pool).await?))
    }
}
