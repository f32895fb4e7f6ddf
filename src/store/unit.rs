//! A unit of work's one connection on PostgreSQL.
//!
//! sqlx's pool checks every connection it takes back with a ping (a `Sync` round trip), so a
//! statement run on the pool costs an acquire and a ping besides itself. A unit of work (a job
//! run: a turn or a click; an outbox round; a console request) instead runs its statements on one
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
//!   nothing waits on the unit's connection, so a unit cannot deadlock itself (a statement on
//!   the pool waits for a free connection, as any statement does).
//! - A connection that failed below the database (a dropped socket, a protocol error) leaves
//!   the unit; its next statement takes a fresh one from the pool.
//! - A transaction on the unit's connection is opened with a plain `BEGIN`, which sqlx does not
//!   count: a savepoint inside it is taken in SQL (`SAVEPOINT`), never with sqlx's nested
//!   `begin`, which would send a second `BEGIN`.
//! - A unit belongs to the store that opened it; another store's statements in the same scope
//!   use their own pool.
//! - A transaction on the unit's connection that is dropped without commit or rollback (an
//!   error's early return, a cancelled future) is rolled back before the connection serves
//!   anything else: a task takes the connection, rolls back and gives it back, and the unit's
//!   statements use the pool meanwhile. A `COMMIT` cancelled while it is awaited has usually
//!   been sent already and may well have committed (the `ROLLBACK` after it then finds nothing
//!   open): a cancelled commit's outcome is unknown, as a commit whose answer was lost, and
//!   every caller treats it so (the ledger looks the effect up, a job's end is fenced).
//! - A `BEGIN` that finds the unit's connection broken (ended while idle across an outside
//!   call) is sent once more on a fresh one ([`PgHandle::begin`]); any other statement's failure
//!   is its caller's, since it may have run.
//! - Tasks spawned inside a unit do not inherit it (task-locals are per task): they use the pool.
//! - A unit never waits on another task that needs a connection (the webhook's wait on the
//!   intake's group commit, say): a burst of such units could hold every connection of the
//!   pool while the task they wait on waits for one. Jobs, outbox rounds and console requests
//!   are units; webhooks are not.
//! - A unit keeps its connection across its outside calls (the model, the Graph API, a Pix
//!   provider): the pool must have room for every worker and sender at once, plus the intake's
//!   writers (`Config::pool_size` makes it so).
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
    static UNIT: Unit;
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
        UNIT.scope(Unit { store: self.id, slot: Arc::default() }, work).await
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
    ///
    /// A unit holds its connection idle across outside calls (a slow model), where a server's
    /// `idle_session_timeout`, a proxy or a failover may end it: a `BEGIN` that finds it broken
    /// is sent once more, on a fresh connection. That is safe because `BEGIN` is the
    /// transaction's first statement: nothing of it reached the database.
    pub(crate) async fn begin(&self) -> sqlx::Result<PgTx> {
        let Some(mut guard) = self.held() else {
            return Ok(PgTx::Pooled(self.pool.begin().await?));
        };
        connect(&mut guard, &self.pool).await?;
        // The transaction exists before `BEGIN` is awaited: cancelled in between, it is rolled
        // back all the same (a `ROLLBACK` with nothing open only warns).
        let mut held = HeldTx { guard: Some(guard) };
        let mut begun = sqlx::raw_sql("BEGIN").execute(held.conn_mut()).await;
        if discard_if_broken(held.guard.as_deref_mut(), &begun)
            && let Some(slot) = held.guard.as_deref_mut()
        {
            connect(slot, &self.pool).await?;
            begun = sqlx::raw_sql("BEGIN").execute(held.conn_mut()).await;
            discard_if_broken(held.guard.as_deref_mut(), &begun);
        }
        begun.map(|_| PgTx::Held(held))
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

/// Runs `statement` on the unit's connection; a connection that failed below the database
/// (a dropped socket, a protocol error) leaves the unit, which takes a fresh one next time.
async fn on_held<T>(
    mut guard: OwnedMutexGuard<Slot>,
    pool: &PgPool,
    statement: impl AsyncFnOnce(&mut PgConnection) -> sqlx::Result<T>,
) -> sqlx::Result<T> {
    let result = statement(connect(&mut guard, pool).await?).await;
    discard_if_broken(Some(&mut guard), &result);
    result
}

/// Closes the slot's connection when `result` says the connection itself broke: below the
/// database, or a connection exception (SQLSTATE class 08) or an operator's intervention (57P,
/// a terminated backend or a shutdown); returns whether it said so. A database's refusal (a
/// constraint, a lock timeout) leaves it usable.
fn discard_if_broken<T>(slot: Option<&mut Slot>, result: &sqlx::Result<T>) -> bool {
    let broken = match result {
        Err(sqlx::Error::Io(_) | sqlx::Error::Tls(_) | sqlx::Error::Protocol(_) | sqlx::Error::WorkerCrashed) => true,
        Err(sqlx::Error::Database(e)) => e.code().is_some_and(|c| c.starts_with("08") || c.starts_with("57P")),
        _ => false,
    };
    if broken && let Some(mut conn) = slot.and_then(Option::take) {
        conn.close_on_drop();
    }
    broken
}

impl<'c> Executor<'c> for &'c PgHandle {
    type Database = Postgres;

    fn fetch_many<'e, 'q: 'e, E>(self, query: E) -> BoxStream<'e, sqlx::Result<Either<PgQueryResult, PgRow>>>
    where
        'c: 'e,
        E: 'q + Execute<'q, Postgres>,
    {
        let Some(guard) = self.held() else {
            return self.pool.fetch_many(query);
        };
        // The rows are collected while the guard is held, then streamed: no store method
        // streams more than a page.
        stream::once(on_held(guard, &self.pool, async move |conn: &mut PgConnection| {
            conn.fetch_many(query).try_collect::<Vec<_>>().await
        }))
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
        let Some(guard) = self.held() else {
            return self.pool.fetch_optional(query);
        };
        Box::pin(on_held(guard, &self.pool, async move |conn: &mut PgConnection| conn.fetch_optional(query).await))
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
    // A live transaction holds its guard (taken only once it has ended) and a connection (put
    // in the slot before `BEGIN`).
    const LIVE: &'static str = "a live transaction holds its connection";

    fn conn(&self) -> &PgConnection {
        self.guard.as_deref().and_then(Option::as_deref).expect(Self::LIVE)
    }

    fn conn_mut(&mut self) -> &mut PgConnection {
        self.guard.as_deref_mut().and_then(Option::as_deref_mut).expect(Self::LIVE)
    }

    /// Ends the transaction with `statement`. The guard stays in `self` until the statement
    /// is answered: cancelled before, a `ROLLBACK` follows on drop (after a `COMMIT` that was
    /// sent, it finds nothing to roll back: the commit's outcome is then unknown).
    async fn end(mut self, statement: &'static str) -> sqlx::Result<()> {
        let ended = sqlx::raw_sql(statement).execute(self.conn_mut()).await;
        let mut guard = self.guard.take();
        if ended.is_err() {
            // Its state is unknown: the connection is closed rather than reused.
            if let Some(mut conn) = guard.as_deref_mut().and_then(Option::take) {
                conn.close_on_drop();
            }
        }
        ended.map(|_| ())
    }
}

impl Drop for HeldTx {
    fn drop(&mut self) {
        let Some(mut guard) = self.guard.take() else { return };
        // Units run in tasks, so there is a runtime. The guard moves into the task: the unit's
        // statements use the pool until the rollback is done.
        tokio::spawn(async move {
            if let Some(conn) = guard.as_mut()
                && sqlx::raw_sql("ROLLBACK").execute(&mut **conn).await.is_err()
                && let Some(mut conn) = guard.take()
            {
                conn.close_on_drop();
            }
        });
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
