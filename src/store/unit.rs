//! A unit of work's one connection on PostgreSQL.
//!
//! sqlx's pool checks every connection it takes back with a ping (a `Sync` round trip), so a
//! statement run on the pool costs an acquire and a ping besides itself. A unit of work (a job
//! run: a turn or a click; an outbox round; an HTTP request) instead runs its statements on one
//! connection, taken at its first statement and given back when the unit ends: one ping per
//! unit, not per statement.
//!
//! How: [`Store::unit`](super::Store::unit) runs a future inside a task-local scope; the
//! PostgreSQL handle the store's methods run on ([`PgHandle`]) looks for that scope and uses its
//! connection. The store is captured by every component (the agent, the executor, the ledger,
//! the outbox), so a scope reaches all of them without threading a connection through their
//! signatures, and no store method can forget it.
//!
//! Invariants:
//! - The unit's connection serves one statement or one transaction at a time. A statement that
//!   finds it busy (a transaction open on it, or a concurrent branch of the same task, such as
//!   the lease's heartbeat beside the turn) runs on the pool instead, exactly as without a unit:
//!   nothing waits on the unit, so it cannot deadlock itself.
//! - A unit belongs to the store that opened it; another store's statements in the same scope
//!   use their own pool.
//! - A transaction on the unit's connection that is dropped without commit or rollback (an
//!   error's early return, a cancelled future) is rolled back before the connection serves
//!   anything else: a task takes the connection, rolls back and gives it back, and the unit's
//!   statements use the pool meanwhile.
//! - Tasks spawned inside a unit do not inherit it (task-locals are per task): they use the pool.
//! - A unit never waits on another task that needs a connection (the webhook's wait on the
//!   intake's group commit, say): a burst of such units could hold every connection of the
//!   pool while the task they wait on waits for one. Jobs, outbox rounds and console requests
//!   are units; webhooks are not.
//! - SQLite has no units: its writes already queue on one connection, and holding that writer
//!   across a unit's reads and outside calls would stall every other writer.

use std::ops::{Deref, DerefMut};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::future::BoxFuture;
use futures::stream::{self, BoxStream, StreamExt, TryStreamExt};
use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgConnection, PgQueryResult, PgRow, PgStatement, PgTypeInfo};
use sqlx::{Describe, Either, Execute, Executor, PgPool, Postgres, SqlStr, Transaction};
use tokio::sync::{Mutex, OwnedMutexGuard};

type Slot = Option<PoolConnection<Postgres>>;

tokio::task_local! {
    static UNIT: Arc<Unit>;
}

/// The connection one unit of work holds, taken at its first statement.
#[derive(Debug)]
pub(crate) struct Unit {
    store: u64,
    slot: Arc<Mutex<Slot>>,
}

/// The PostgreSQL pool as the store's methods see it: the current unit's connection when the
/// task runs inside one of this store's units and it is free, the pool otherwise.
#[derive(Clone, Debug)]
pub struct PgHandle {
    pool: PgPool,
    /// Which store this is, so a unit serves only the store that opened it.
    id: u64,
}

static NEXT_STORE: AtomicU64 = AtomicU64::new(1);

impl PgHandle {
    pub(crate) fn new(pool: PgPool) -> Self {
        Self { pool, id: NEXT_STORE.fetch_add(1, Ordering::Relaxed) }
    }

    pub(crate) fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Runs `work` as one unit of work of this store.
    pub(crate) async fn scope<F: Future>(&self, work: F) -> F::Output {
        let unit = Arc::new(Unit { store: self.id, slot: Arc::default() });
        UNIT.scope(unit, work).await
    }

    /// The current unit's connection slot, if this task is in one of this store's units and
    /// the connection is free.
    fn held(&self) -> Option<OwnedMutexGuard<Slot>> {
        UNIT.try_with(|unit| (unit.store == self.id).then(|| unit.slot.clone()))
            .ok()
            .flatten()
            .and_then(|slot| slot.try_lock_owned().ok())
    }

    /// Starts a write transaction: on the unit's connection when it is free.
    pub(crate) async fn begin(&self) -> sqlx::Result<PgTx> {
        match self.held() {
            Some(mut guard) => {
                sqlx::raw_sql("BEGIN").execute(connect(&mut guard, &self.pool).await?).await?;
                Ok(PgTx::Held(HeldTx { guard: Some(guard) }))
            }
            None => Ok(PgTx::Pooled(self.pool.begin().await?)),
        }
    }
}

/// The unit's connection, taken from the pool on first use.
async fn connect<'g>(slot: &'g mut Slot, pool: &PgPool) -> sqlx::Result<&'g mut PgConnection> {
    let conn = match slot.take() {
        Some(conn) => slot.insert(conn),
        None => slot.insert(pool.acquire().await?),
    };
    Ok(&mut **conn)
}

impl<'c> Executor<'c> for &'c PgHandle {
    type Database = Postgres;

    fn fetch_many<'e, 'q: 'e, E>(self, query: E) -> BoxStream<'e, sqlx::Result<Either<PgQueryResult, PgRow>>>
    where
        'c: 'e,
        E: 'q + Execute<'q, Postgres>,
    {
        let Some(mut guard) = self.held() else {
            return self.pool.fetch_many(query);
        };
        // The rows are collected while the guard is held, then streamed: no store method
        // streams more than a page.
        stream::once(async move {
            let conn = connect(&mut guard, &self.pool).await?;
            conn.fetch_many(query).try_collect::<Vec<_>>().await
        })
        .map(|rows| match rows {
            Ok(rows) => stream::iter(rows.into_iter().map(Ok)).left_stream(),
            Err(e) => stream::iter([Err(e)]).right_stream(),
        })
        .flatten()
        .boxed()
    }

    fn fetch_optional<'e, 'q: 'e, E>(self, query: E) -> BoxFuture<'e, sqlx::Result<Option<PgRow>>>
    where
        'c: 'e,
        E: 'q + Execute<'q, Postgres>,
    {
        let Some(mut guard) = self.held() else {
            return self.pool.fetch_optional(query);
        };
        Box::pin(async move { connect(&mut guard, &self.pool).await?.fetch_optional(query).await })
    }

    fn prepare_with<'e>(self, sql: SqlStr, parameters: &'e [PgTypeInfo]) -> BoxFuture<'e, sqlx::Result<PgStatement>>
    where
        'c: 'e,
    {
        self.pool.prepare_with(sql, parameters)
    }

    fn describe<'e>(self, sql: SqlStr) -> BoxFuture<'e, sqlx::Result<Describe<Postgres>>>
    where
        'c: 'e,
    {
        self.pool.describe(sql)
    }
}

/// A write transaction on PostgreSQL: on the unit's connection, or on one from the pool.
pub(crate) enum PgTx {
    Held(HeldTx),
    Pooled(Transaction<'static, Postgres>),
}

/// A transaction opened with `BEGIN` on the unit's connection, which it holds until it ends.
pub(crate) struct HeldTx {
    /// `None` once committed or rolled back.
    guard: Option<OwnedMutexGuard<Slot>>,
}

impl PgTx {
    pub(crate) async fn commit(self) -> sqlx::Result<()> {
        match self {
            Self::Held(held) => held.end("COMMIT").await,
            Self::Pooled(tx) => tx.commit().await,
        }
    }

    pub(crate) async fn rollback(self) -> sqlx::Result<()> {
        match self {
            Self::Held(held) => held.end("ROLLBACK").await,
            Self::Pooled(tx) => tx.rollback().await,
        }
    }
}

impl HeldTx {
    async fn end(mut self, statement: &'static str) -> sqlx::Result<()> {
        let Some(mut guard) = self.guard.take() else { return Ok(()) };
        let Some(conn) = guard.as_mut() else { return Ok(()) };
        let ended = sqlx::raw_sql(statement).execute(&mut **conn).await;
        if ended.is_err() {
            // Its state is unknown: the connection is closed rather than reused.
            if let Some(mut conn) = guard.take() {
                conn.close_on_drop();
            }
        }
        ended.map(|_| ())
    }
}

impl HeldTx {
    // A live transaction holds its guard (taken only as it ends, which consumes it) and a
    // connection (put in the slot before `BEGIN`).
    const LIVE: &'static str = "a live transaction holds its connection";

    fn conn(&self) -> &PgConnection {
        self.guard.as_deref().and_then(Option::as_deref).expect(Self::LIVE)
    }

    fn conn_mut(&mut self) -> &mut PgConnection {
        self.guard.as_deref_mut().and_then(Option::as_deref_mut).expect(Self::LIVE)
    }
}

impl Drop for HeldTx {
    fn drop(&mut self) {
        let Some(mut guard) = self.guard.take() else { return };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                // The guard moves into the task: the unit's statements use the pool until the
                // rollback is done.
                runtime.spawn(async move {
                    if let Some(conn) = guard.as_mut()
                        && sqlx::raw_sql("ROLLBACK").execute(&mut **conn).await.is_err()
                        && let Some(mut conn) = guard.take()
                    {
                        conn.close_on_drop();
                    }
                });
            }
            Err(_) => {
                // No runtime to roll back on: closing the connection aborts the transaction.
                if let Some(mut conn) = guard.take() {
                    conn.close_on_drop();
                }
            }
        }
    }
}

impl Deref for PgTx {
    type Target = PgConnection;
    fn deref(&self) -> &PgConnection {
        match self {
            Self::Held(held) => held.conn(),
            Self::Pooled(tx) => tx,
        }
    }
}

impl DerefMut for PgTx {
    fn deref_mut(&mut self) -> &mut PgConnection {
        match self {
            Self::Held(held) => held.conn_mut(),
            Self::Pooled(tx) => tx,
        }
    }
}
