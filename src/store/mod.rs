//! Storage on SQLite (embedded default) and PostgreSQL, behind traits split by aggregate.
//!
//! The dependency rule: features (`inbound`, `jobs`, `agent`, `ledger`, `outbox`, `http`, …)
//! import the store. The store owns the rows of the pipeline's tables (the queue's in [`queue`],
//! the outbox's in [`outbound`], the intake's in [`received`]); of the features above it, it may
//! name only the record types it keeps (a ledger row and its fence, a turn's end, a charge, a
//! pending action: `tests/api/layers.rs` lists them), never their workflows. The one behaviour
//! it calls on such a type is the fence's own marker (`Fence::mark_settled` once a settlement
//! commits, `Claim::mark_lost`), which records what the transaction decided. Transaction
//! fragments several files compose are in `tx`; the console's read models in [`console`].
//!
//! Invariants:
//! - SQL is written once where the dialects agree (`$N` placeholders, `ON CONFLICT`,
//!   `RETURNING`, `CASE` instead of `GREATEST`); the few differences are explicit through
//!   [`Dialect`] and the two pool macros: SQLite write transactions start with `BEGIN IMMEDIATE` (a deferred one that
//!   reads first fails with `SQLITE_BUSY_SNAPSHOT` under concurrency), PostgreSQL claims use
//!   `FOR UPDATE SKIP LOCKED`.
//! - Every timestamp is bound from Rust, never SQL-side `now()`: SQLite compares them as text.
//!   Instants that leases are measured from are first put on the database's clock
//!   ([`Store::db_time`]), so on PostgreSQL leases, reaping and takeovers follow the database's
//!   clock, not each server's.
//! - Every query names the tenant it works for.
//! - Each method is complete, its transaction inside. A caller that runs several (a job, an
//!   outbox round, a console request) runs them as one unit of work ([`Store::unit`]): on
//!   PostgreSQL on one connection, so sqlx's check of a connection given back to the pool is
//!   paid once per unit, not per statement ([`unit`]).

mod actions;
mod admins;
mod agenda;
mod appointments;
mod catalog;
mod charges;
pub mod console;
mod deposits;
pub mod due;
mod erasure;
mod handoff;
mod history;
mod inbound;
mod intake;
mod jobs;
mod ledger;
mod logins;
mod menu;
mod message_effects;
mod message_ids;
pub mod outbound;
mod outbox;
mod payers;
mod payments;
mod privacy;
pub mod queue;
pub mod received;
mod refunds;
pub mod replays;
mod simulator;
mod tenants;
mod tx;
mod unit;

use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};
use sqlx::{SqlitePool, Transaction};

pub use actions::{ActionStore, Decider, NewAction};
pub use admins::{AdminRecord, AdminStore, TenantRef};
pub use agenda::AgendaStore;
pub use appointments::{BookingError, BookingStore, Hold, Move, NewAppointment, SettleWith};
pub use catalog::CatalogStore;
pub use charges::{ChargeStore, NewCharge, RecentCustomer};
pub use console::agenda::{ActionEntry, AgendaEntry, AppointmentDetail, ConsoleAgendaStore, LedgerEntry};
pub use console::conversations::{
    ActionRow, ChargeRow, ConversationSummary, ConversationVersion, ConversationViewStore, InboundRow, TurnRow,
};
pub use console::operations::{ChargeEntry, ConsoleOpsStore, DeadJob, FailedSend, Retry};
pub use deposits::{DepositPayment, DepositStore};
pub use erasure::{Cancelled, CancelledAction, ErasureStore, Gate, Redactions, TombstoneStore, erased_key};
pub use handoff::{HandoffState, HandoffStore};
pub use history::{HistoryStore, ModelCall, StoredMessage};
pub use inbound::{InboundStore, Recorded};
pub use intake::IntakeStore;
pub use jobs::{JobStore, RunnableJobs, TurnFinished};
pub use ledger::{LedgerStore, NewExecution, Settlement, TakeOver};
pub use logins::{LoginFailures, LoginStore, Tally};
pub use menu::MenuStore;
pub use message_effects::{MessageEffectStore, NumberMoved};
pub use outbound::{ClaimedOutbound, Destination, NewOutbound, OutboundRecord, OutboxKey};
pub use outbox::{OutboxStore, RescheduleAs};
pub use payments::{NO_CHARGE_YET, NewPaymentEvent, PaymentStore};
pub use privacy::{
    ContactCounts, ContactExport, ContactRecord, ExportedAction, ExportedAppointment, ExportedCharge, ExportedInbound,
    ExportedOutbound, PrivacyStore,
};
pub use queue::{ClaimedJob, FailOutcome, JobKind, JobSnapshot, JobState, Lease, TurnTiming};
pub use received::{ContactUpsert, ConversationContact, ConversationRef, InboundMessage, IntakeWrite, Written};
pub use refunds::{NewRefund, RefundStore, Reserved};
pub use simulator::{SentMessage, SimulatorStore};
pub use tenants::TenantStore;
pub use unit::PgHandle;
use unit::PgTx;

use crate::domain::DatabaseUrl;

static SQLITE_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("migrations/sqlite");
static POSTGRES_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("migrations/postgres");

/// What a write did to its rows, alike on both backends (sqlx gives each its own result type).
pub(crate) trait RowsAffected {
    fn rows(&self) -> u64;
}

impl RowsAffected for sqlx::sqlite::SqliteQueryResult {
    fn rows(&self) -> u64 {
        self.rows_affected()
    }
}

impl RowsAffected for sqlx::postgres::PgQueryResult {
    fn rows(&self) -> u64 {
        self.rows_affected()
    }
}

/// Whether a conditional write changed its one row: the answer of every update that decides
/// something (a lease still held, a status still pending, a handoff still on).
pub(crate) fn changed_one(result: impl RowsAffected) -> bool {
    result.rows() == 1
}

/// How often the SQLite write-ahead log is folded back into the database file.
const SQLITE_CHECKPOINT_EVERY: Duration = Duration::from_secs(1);
/// SQLite waits this long for the single writer before giving up with `database is locked`.
const SQLITE_BUSY_TIMEOUT: Duration = Duration::from_secs(10);
/// The database clock is read again this often: clocks drift, and NTP steps them.
const CLOCK_SYNC_EVERY: Duration = Duration::from_secs(60);
/// A pool that cannot hand out a connection for this long is a failure, not a queue.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(10);
/// Whether pools ping a connection before handing it out. They do not: the ping is a round trip
/// before every statement (on PostgreSQL as long as the statement itself), paid to catch a
/// connection that broke while idle, which is rare. Such a connection then shows as the
/// statement's error instead, and every caller already treats a database error as retryable
/// (jobs retry, the executor leaves the key to a takeover, HTTP answers 5xx). sqlx still checks
/// each connection as it comes back to the pool, off the caller's path, and closes a broken one,
/// so the retry gets a fresh connection.
const TEST_BEFORE_ACQUIRE: bool = false;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("not found: {0}")]
    NotFound(String),
    #[error("conflict: {0}")]
    Conflict(String),
    /// A turn's write was refused: the job lease it was made under is no longer held.
    #[error("the turn's job lease was lost; another attempt owns the turn")]
    LeaseLost,
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    #[error("migration error: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("stored data is invalid: {0}")]
    Corrupt(String),
}

pub type StoreResult<T> = Result<T, StoreError>;

#[derive(Clone, Debug)]
pub enum Pool {
    /// SQLite has one writer at a time: writes queue fairly on a single connection instead of
    /// spinning on `SQLITE_BUSY`, while readers use their own pool (WAL lets them run alongside).
    Sqlite { read: SqlitePool, write: SqlitePool },
    /// The pool, or a unit of work's connection (see [`unit`]).
    Postgres(PgHandle),
}

/// Cheap to clone: a handle on a connection pool.
#[derive(Clone, Debug)]
pub struct Store {
    pub(crate) pool: Pool,
    clock: Arc<DbClock>,
    /// Transactions the SQLite writer committed (SQLite's commit hook), for benchmarks.
    sqlite_commits: Arc<AtomicU64>,
    /// Repeats of ledger rows not yet written (see `replays`).
    replays: Arc<replays::ReplayTally>,
}

/// Whether a failed connection may succeed in a moment: nothing listening yet, or PostgreSQL
/// still starting up (SQLSTATE 57P03, "the database system is starting up").
fn starting(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Io(io) => io.kind() == std::io::ErrorKind::ConnectionRefused,
        sqlx::Error::Database(db) => db.code().as_deref() == Some("57P03"),
        _ => false,
    }
}

/// How far the database's clock is ahead of this server's. Leases are compared across server
/// instances, so every instant a lease is measured from is first put on the database's clock
/// ([`Store::db_time`]): skew between servers then cannot expire a live lease early or keep a
/// dead one late. SQLite lives on one machine with one clock: its skew is zero.
#[derive(Debug, Default)]
struct DbClock {
    skew_micros: AtomicI64,
}

/// Runs a read-only body against the store's reading pool. The body is type-checked once per
/// backend, so one SQL text serves both.
macro_rules! reading {
    ($store:expr, $pool:ident => $body:expr) => {
        match &$store.pool {
            $crate::store::Pool::Sqlite { read: $pool, .. } => $body,
            $crate::store::Pool::Postgres($pool) => $body,
        }
    };
}
pub(crate) use reading;

/// Runs a body that writes against the store's writing pool.
macro_rules! writing {
    ($store:expr, $pool:ident => $body:expr) => {
        match &$store.pool {
            $crate::store::Pool::Sqlite { write: $pool, .. } => $body,
            $crate::store::Pool::Postgres($pool) => $body,
        }
    };
}
pub(crate) use writing;

/// The explicit dialect differences, implemented by each pool type.
pub(crate) trait Dialect {
    type Db: sqlx::Database;
    /// A write transaction: the backend's connection while it is open.
    type Tx: std::ops::DerefMut<Target = <Self::Db as sqlx::Database>::Connection> + Send;
    /// Starts a transaction that will write.
    async fn begin_write(&self) -> sqlx::Result<Self::Tx>;
    /// Chooses between two spellings of one statement.
    fn pick(&self, sqlite: &'static str, postgres: &'static str) -> &'static str;
    /// Waits for, then holds until `tx` ends, the transaction locks named by `keys`, taken in
    /// the order given. SQLite has one writer at a time, so it has nothing to wait for.
    async fn queue_behind(&self, tx: &mut Self::Tx, keys: &[i64]) -> sqlx::Result<()>;
}

impl Dialect for SqlitePool {
    type Db = sqlx::Sqlite;
    type Tx = Transaction<'static, sqlx::Sqlite>;
    async fn begin_write(&self) -> sqlx::Result<Self::Tx> {
        self.begin_with("BEGIN IMMEDIATE").await
    }
    fn pick(&self, sqlite: &'static str, _postgres: &'static str) -> &'static str {
        sqlite
    }
    async fn queue_behind(&self, _tx: &mut Self::Tx, _keys: &[i64]) -> sqlx::Result<()> {
        Ok(())
    }
}

impl Dialect for PgHandle {
    type Db = sqlx::Postgres;
    type Tx = PgTx;
    async fn begin_write(&self) -> sqlx::Result<PgTx> {
        self.begin().await
    }
    fn pick(&self, _sqlite: &'static str, postgres: &'static str) -> &'static str {
        postgres
    }
    async fn queue_behind(&self, tx: &mut PgTx, keys: &[i64]) -> sqlx::Result<()> {
        // One round trip; a function scan yields the array's elements in order, so the locks
        // are taken in the order given.
        sqlx::query("SELECT count(pg_advisory_xact_lock(k)) FROM unnest($1::bigint[]) WITH ORDINALITY AS u(k, n)")
            .bind(keys)
            .execute(&mut **tx)
            .await
            .map(|_| ())
    }
}

impl Store {
    /// Connects without migrating.
    pub async fn connect(url: &DatabaseUrl, max_connections: u32) -> StoreResult<Self> {
        if url.is_postgres() {
            let options = PgConnectOptions::from_str(url.expose())?;
            Self::connect_postgres(options, max_connections).await
        } else {
            let options = SqliteConnectOptions::from_str(url.expose())?;
            if let Some(dir) = options.get_filename().parent()
                && !dir.as_os_str().is_empty()
            {
                std::fs::create_dir_all(dir).map_err(|e| {
                    StoreError::Database(sqlx::Error::Configuration(
                        format!("cannot create database directory {}: {e}", dir.display()).into(),
                    ))
                })?;
            }
            Self::connect_sqlite(options, max_connections).await
        }
    }

    pub async fn connect_sqlite(options: SqliteConnectOptions, max_connections: u32) -> StoreResult<Self> {
        let options = options
            .create_if_missing(true)
            .journal_mode(sqlx::sqlite::SqliteJournalMode::Wal)
            .synchronous(sqlx::sqlite::SqliteSynchronous::Normal)
            .foreign_keys(true)
            .busy_timeout(SQLITE_BUSY_TIMEOUT);
        // The writer never checkpoints (that would put an fsync inside some unlucky commit);
        // a background task does it without blocking the writer.
        let sqlite_commits = Arc::new(AtomicU64::new(0));
        let counter = sqlite_commits.clone();
        let write = SqlitePoolOptions::new()
            .max_connections(1)
            .acquire_timeout(ACQUIRE_TIMEOUT)
            .test_before_acquire(TEST_BEFORE_ACQUIRE)
            .after_connect(move |conn, _| {
                let counter = counter.clone();
                Box::pin(async move {
                    // SQLite calls it for write transactions only, autocommitted statements too.
                    conn.lock_handle().await?.set_commit_hook(move || {
                        counter.fetch_add(1, Ordering::Relaxed);
                        true
                    });
                    Ok(())
                })
            })
            .connect_with(options.clone().pragma("wal_autocheckpoint", "0"))
            .await?;
        let read = SqlitePoolOptions::new()
            .max_connections(max_connections)
            .acquire_timeout(ACQUIRE_TIMEOUT)
            .test_before_acquire(TEST_BEFORE_ACQUIRE)
            .connect_with(options)
            .await?;
        tokio::spawn(checkpoint_wal(read.clone()));
        Ok(Self { pool: Pool::Sqlite { read, write }, clock: Arc::default(), sqlite_commits, replays: Arc::default() })
    }

    pub async fn connect_postgres(options: PgConnectOptions, max_connections: u32) -> StoreResult<Self> {
        // One connection first: a pool that cannot connect says only "pool timed out", one
        // connection says why ("connection refused", a wrong password, no such database). A
        // database still starting (refused, or "starting up") is tried again, as the pool would,
        // until the same timeout; then its last error is the one reported.
        let deadline = tokio::time::Instant::now() + ACQUIRE_TIMEOUT;
        let mut wait = Duration::from_millis(100);
        loop {
            match <sqlx::PgConnection as sqlx::Connection>::connect_with(&options).await {
                Ok(probe) => {
                    sqlx::Connection::close(probe).await?;
                    break;
                }
                Err(e) if tokio::time::Instant::now() + wait < deadline && starting(&e) => {
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(Duration::from_secs(1));
                }
                Err(e) => return Err(e.into()),
            }
        }
        let pool = PgPoolOptions::new()
            .max_connections(max_connections)
            .acquire_timeout(ACQUIRE_TIMEOUT)
            .test_before_acquire(TEST_BEFORE_ACQUIRE)
            .connect_with(options)
            .await?;
        let store = Self {
            pool: Pool::Postgres(PgHandle::new(pool)),
            clock: Arc::default(),
            sqlite_commits: Arc::default(),
            replays: Arc::default(),
        };
        store.sync_clock().await?;
        tokio::spawn(resync_clock(store.clone()));
        Ok(store)
    }

    /// Instant `t` of this server's clock, on the database's clock.
    pub fn db_time(&self, t: DateTime<Utc>) -> DateTime<Utc> {
        t + TimeDelta::microseconds(self.clock.skew_micros.load(Ordering::Relaxed))
    }

    /// Measures the database clock against this server's; returns the skew.
    pub async fn sync_clock(&self) -> StoreResult<TimeDelta> {
        self.sync_clock_with(Utc::now).await
    }

    /// [`Self::sync_clock`] against the clock `local` (tests stand in for a server whose clock
    /// is off).
    pub async fn sync_clock_with(&self, local: impl Fn() -> DateTime<Utc>) -> StoreResult<TimeDelta> {
        let Pool::Postgres(pool) = &self.pool else {
            return Ok(TimeDelta::zero());
        };
        let before = local();
        let db: DateTime<Utc> = sqlx::query_scalar("SELECT clock_timestamp()").fetch_one(pool).await?;
        let after = local();
        // The database read its clock somewhere within the round trip: take the middle.
        let skew = db - (before + (after - before) / 2);
        self.clock.skew_micros.store(skew.num_microseconds().unwrap_or(0), Ordering::Relaxed);
        Ok(skew)
    }

    /// Write transactions committed through this store on SQLite (counted by SQLite's commit
    /// hook on the single writer); `None` on PostgreSQL, whose statistics count them instead.
    pub fn sqlite_commits(&self) -> Option<u64> {
        matches!(self.pool, Pool::Sqlite { .. }).then(|| self.sqlite_commits.load(Ordering::Relaxed))
    }

    /// The same database through connections of its own, at most `max` (opened as needed):
    /// for the edge strangers reach (the console), so no request there can take a connection
    /// the workers, the intake's writers, the senders or the sweeps need. On SQLite the reads
    /// get a pool of their own; writes still queue on the one writer, a statement each.
    pub fn edge(&self, max: u32) -> Self {
        let pool = match &self.pool {
            Pool::Postgres(pg) => Pool::Postgres(PgHandle::new(
                PgPoolOptions::new()
                    .max_connections(max)
                    .acquire_timeout(ACQUIRE_TIMEOUT)
                    .test_before_acquire(TEST_BEFORE_ACQUIRE)
                    .connect_lazy_with(pg.pool().connect_options().as_ref().clone()),
            )),
            Pool::Sqlite { read, write } => Pool::Sqlite {
                read: SqlitePoolOptions::new()
                    .max_connections(max)
                    .acquire_timeout(ACQUIRE_TIMEOUT)
                    .test_before_acquire(TEST_BEFORE_ACQUIRE)
                    .connect_lazy_with(read.connect_options().as_ref().clone()),
                write: write.clone(),
            },
        };
        Self { pool, ..self.clone() }
    }

    /// Closes this store's own connections without writing anything (an [`Self::edge`]'s).
    pub async fn close_edge(&self) {
        match &self.pool {
            Pool::Sqlite { read, .. } => read.close().await,
            Pool::Postgres(pg) => pg.pool().close().await,
        }
    }

    /// Runs `work` as one unit of work: on PostgreSQL its statements share one connection,
    /// taken at the first and given back at the end (see [`unit`]). Jobs, outbox rounds and
    /// console requests each run in one.
    pub async fn unit<F: Future>(&self, work: F) -> F::Output {
        match &self.pool {
            Pool::Postgres(pg) => pg.scope(work).await,
            Pool::Sqlite { .. } => work.await,
        }
    }

    /// Which database session serves a statement here: PostgreSQL's backend process id,
    /// `None` on SQLite. Shows which connection a unit of work runs on.
    pub async fn connection_id(&self) -> StoreResult<Option<i32>> {
        match &self.pool {
            Pool::Postgres(pg) => Ok(Some(sqlx::query_scalar("SELECT pg_backend_pid()").fetch_one(pg).await?)),
            Pool::Sqlite { .. } => Ok(None),
        }
    }

    pub fn backend(&self) -> &'static str {
        match self.pool {
            Pool::Sqlite { .. } => "sqlite",
            Pool::Postgres(_) => "postgres",
        }
    }

    pub async fn migrate(&self) -> StoreResult<()> {
        match &self.pool {
            Pool::Sqlite { write, .. } => SQLITE_MIGRATIONS.run(write).await?,
            Pool::Postgres(pg) => POSTGRES_MIGRATIONS.run(pg.pool()).await?,
        }
        Ok(())
    }

    /// True when the database answers and every embedded migration has been applied.
    pub async fn is_ready(&self) -> StoreResult<bool> {
        let latest = match &self.pool {
            Pool::Sqlite { .. } => SQLITE_MIGRATIONS.iter().map(|m| m.version).max(),
            Pool::Postgres(_) => POSTGRES_MIGRATIONS.iter().map(|m| m.version).max(),
        }
        .unwrap_or(0);
        let applied: Option<i64> = reading!(self, pool => {
            sqlx::query_scalar("SELECT MAX(version) FROM _sqlx_migrations WHERE success")
                .fetch_one(pool)
                .await
        })?;
        Ok(applied.unwrap_or(0) >= latest)
    }

    /// Writes what is pending (replay counts), then closes the pools.
    pub async fn close(&self) {
        if let Err(e) = self.flush_replay_counts_within(ACQUIRE_TIMEOUT).await {
            tracing::warn!(error = %e, "replay counts not written before closing");
        }
        match &self.pool {
            Pool::Sqlite { read, write } => {
                read.close().await;
                write.close().await;
            }
            Pool::Postgres(pg) => pg.pool().close().await,
        }
    }
}

/// Reads the database clock again every [`CLOCK_SYNC_EVERY`] until the pool closes.
async fn resync_clock(store: Store) {
    let Pool::Postgres(pg) = &store.pool else { return };
    let pool = pg.pool();
    while !pool.is_closed() {
        tokio::time::sleep(CLOCK_SYNC_EVERY).await;
        if let Err(e) = store.sync_clock().await
            && !pool.is_closed()
        {
            tracing::warn!(error = %e, "reading the database clock failed; keeping the last skew");
        }
    }
}

/// Folds the SQLite WAL into the database until the pool closes. PASSIVE never waits for
/// readers or the writer; whatever it cannot copy now it copies on a later round.
async fn checkpoint_wal(pool: SqlitePool) {
    let mut tick = tokio::time::interval(SQLITE_CHECKPOINT_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while !pool.is_closed() {
        tick.tick().await;
        if let Err(e) = sqlx::query("PRAGMA wal_checkpoint(PASSIVE)").execute(&pool).await
            && !pool.is_closed()
        {
            tracing::warn!(error = %e, "SQLite checkpoint failed");
        }
    }
}
