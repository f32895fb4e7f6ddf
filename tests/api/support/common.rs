//! Test databases, the test app and the `contract!` macro that runs a case on both backends.

use std::collections::HashMap;
use std::str::FromStr;
use std::sync::Arc;

use balcao::app::App;
use balcao::config::Config;
use balcao::domain::Secret;
use balcao::jobs::{TurnHandler, Worker};
use balcao::metrics::Metrics;
use balcao::outbox::OutboxSender;
use balcao::store::{Store, TenantStore};
use balcao::tenant::{Tenant, TenantSpec};
use balcao::turns::HandlerContext;
use sqlx::postgres::PgConnectOptions;
use sqlx::sqlite::SqliteConnectOptions;
use tokio::sync::oneshot;

pub const APP_SECRET: &str = "test-app-secret";
pub const VERIFY_TOKEN: &str = "verify-me";
pub const ACCESS_TOKEN: &str = "EAAG-test-token";
/// The `phone_number_id` of Meta's documented payloads.
pub const PHONE_NUMBER_ID: &str = "106540352242922";

/// A fresh database: a SQLite file in a temporary directory, or a PostgreSQL schema of its own.
pub struct TestDb {
    pub store: Store,
    _dir: Option<tempfile::TempDir>,
    pub sqlite: Option<SqliteConnectOptions>,
    pub pg: Option<(PgConnectOptions, String)>,
}

impl TestDb {
    pub async fn sqlite() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let options = SqliteConnectOptions::from_str(&format!("sqlite://{}", dir.path().join("test.db").display()))
            .expect("sqlite url");
        let store = Store::connect_sqlite(options.clone(), 8).await.expect("open sqlite");
        store.migrate().await.expect("migrate sqlite");
        Self { store, _dir: Some(dir), sqlite: Some(options), pg: None }
    }

    /// `None` (with a notice) when `BALCAO_TEST_POSTGRES_URL` is unset, unless
    /// `BALCAO_REQUIRE_POSTGRES=1`, where a skip is a failure.
    pub async fn postgres() -> Option<Self> {
        let Ok(url) = std::env::var("BALCAO_TEST_POSTGRES_URL") else {
            if std::env::var("BALCAO_REQUIRE_POSTGRES").is_ok_and(|v| v == "1") {
                panic!("BALCAO_REQUIRE_POSTGRES=1 but BALCAO_TEST_POSTGRES_URL is not set");
            }
            // Written past the test harness's capture, once per run, so a skip is never silent.
            static NOTICE: std::sync::Once = std::sync::Once::new();
            NOTICE.call_once(|| {
                use std::io::Write;
                let _ = writeln!(
                    std::io::stderr(),
                    "NOTICE: PostgreSQL cases are skipped: set BALCAO_TEST_POSTGRES_URL to run them"
                );
            });
            return None;
        };
        let base = PgConnectOptions::from_str(&url).expect("postgres url");
        let schema = format!("t_{}", uuid::Uuid::new_v4().simple());
        let admin = sqlx::PgPool::connect_with(base.clone()).await.expect("connect postgres");
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
            .execute(&admin)
            .await
            .expect("create schema");
        admin.close().await;
        let options = base.clone().options([("search_path", schema.as_str())]);
        let store = Store::connect_postgres(options, 8).await.expect("open postgres");
        store.migrate().await.expect("migrate postgres");
        Some(Self { store, _dir: None, sqlite: None, pg: Some((base, schema)) })
    }

    /// A second store on the same database (the app under test closes its own on shutdown).
    pub async fn reopen(&self) -> Store {
        self.reopen_with(2).await
    }

    /// [`Self::reopen`] with a pool of `max` connections.
    pub async fn reopen_with(&self, max: u32) -> Store {
        match (&self.sqlite, &self.pg) {
            (Some(options), _) => Store::connect_sqlite(options.clone(), max).await.expect("reopen sqlite"),
            (None, Some((base, schema))) => {
                Store::connect_postgres(base.clone().options([("search_path", schema.as_str())]), max)
                    .await
                    .expect("reopen postgres")
            }
            (None, None) => unreachable!("a test database is sqlite or postgres"),
        }
    }

    pub async fn cleanup(self) {
        self.store.close().await;
        if let Some((base, schema)) = self.pg
            && let Ok(admin) = sqlx::PgPool::connect_with(base).await
        {
            let _ = sqlx::query(sqlx::AssertSqlSafe(format!("DROP SCHEMA {schema} CASCADE"))).execute(&admin).await;
            admin.close().await;
        }
    }

    /// The tenant of Meta's documented payloads.
    pub async fn tenant(&self) -> Tenant {
        self.tenant_with(PHONE_NUMBER_ID, "barbearia", None).await
    }

    pub async fn tenant_with(&self, phone_number_id: &str, slug: &str, access_token: Option<&str>) -> Tenant {
        let token = access_token.map(|t| format!("access_token = \"{t}\"\n")).unwrap_or_default();
        let spec = TenantSpec::parse(&format!(
            "name = \"Barbearia do Zé\"\nslug = \"{slug}\"\ntimezone = \"America/Sao_Paulo\"\n\
             staff = [\"+5511988887777\"]\n[whatsapp]\nphone_number_id = \"{phone_number_id}\"\n{token}"
        ))
        .expect("tenant spec");
        self.store.apply_tenant(&spec, chrono::Utc::now()).await.expect("apply tenant");
        self.store.tenant_by_slug(slug).await.expect("load tenant").expect("tenant exists")
    }
}

/// Runs `$body` with `$pool` bound to a pool of its own on the test database, closed after: for
/// what a test reads or writes behind the store's back.
#[macro_export]
macro_rules! raw_pool {
    ($db:expr, $pool:ident => $body:expr) => {{
        if let Some(options) = &$db.sqlite {
            let $pool = sqlx::SqlitePool::connect_with(options.clone()).await.unwrap();
            let out = $body;
            $pool.close().await;
            out
        } else {
            let (base, schema) = $db.pg.as_ref().unwrap();
            let $pool =
                sqlx::PgPool::connect_with(base.clone().options([("search_path", schema.as_str())])).await.unwrap();
            let out = $body;
            $pool.close().await;
            out
        }
    }};
}

/// How many contacts `tenant` has.
pub async fn contacts(db: &TestDb, tenant: balcao::domain::TenantId) -> i64 {
    crate::raw_pool!(db, pool => sqlx::query_scalar::<_, i64>("SELECT COUNT(*) FROM contacts WHERE tenant_id = $1")
        .bind(tenant.0)
        .fetch_one(&pool)
        .await
        .unwrap())
}

/// Runs one async case on SQLite and on PostgreSQL:
/// `contract!(name, |db| async move { ... });`
#[macro_export]
macro_rules! contract {
    ($name:ident, |$db:ident| $body:expr) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            async fn case($db: &$crate::support::common::TestDb) {
                $body.await
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn sqlite() {
                let db = $crate::support::common::TestDb::sqlite().await;
                case(&db).await;
                db.cleanup().await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn postgres() {
                if let Some(db) = $crate::support::common::TestDb::postgres().await {
                    case(&db).await;
                    db.cleanup().await;
                }
            }
        }
    };
}

/// Settings for tests: port 0, known secrets, the fake Graph API, fast timings.
pub fn test_config(graph_url: &str, extra: &[(&str, &str)]) -> Config {
    let secrets = [
        ("WHATSAPP_APP_SECRET", APP_SECRET),
        ("WHATSAPP_VERIFY_TOKEN", VERIFY_TOKEN),
        ("WHATSAPP_ACCESS_TOKEN", ACCESS_TOKEN),
    ];
    config_from(graph_url, &secrets, extra)
}

/// A production server (a real App Secret) with no WhatsApp access token: its tenants without
/// a token of their own send nothing, so the simulator may serve them.
pub fn sandbox_test_config(graph_url: &str, extra: &[(&str, &str)]) -> Config {
    let mut config = test_config(graph_url, extra);
    config.whatsapp.access_token = None;
    config
}

/// Local mode as `cargo run` starts it: no App Secret (webhooks are signed with the public
/// development secret), no access token, on a loopback port.
pub fn local_test_config(graph_url: &str, extra: &[(&str, &str)]) -> Config {
    let config = config_from(graph_url, &[("WHATSAPP_VERIFY_TOKEN", VERIFY_TOKEN)], extra);
    assert!(config.whatsapp.local_mode, "extra settings left local mode");
    config
}

fn config_from(graph_url: &str, secrets: &[(&str, &str)], extra: &[(&str, &str)]) -> Config {
    let mut vars: HashMap<String, String> = [
        ("BALCAO_ADDR", "127.0.0.1:0"),
        ("WHATSAPP_API_URL", graph_url),
        ("BALCAO_HTTP_TIMEOUT_SECONDS", "1"),
        ("BALCAO_JOB_LEASE_SECONDS", "30"),
        ("BALCAO_POLL_INTERVAL_MS", "20"),
        ("BALCAO_SHUTDOWN_GRACE_SECONDS", "5"),
    ]
    .into_iter()
    .chain(secrets.iter().copied())
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    for (k, v) in extra {
        vars.insert((*k).to_owned(), (*v).to_owned());
    }
    Config::from_vars(&vars).expect("test config")
}

/// A server on port 0 serving HTTP; turns and sends are driven by the test through `worker`
/// and `sender`, so nothing happens behind its back.
pub struct TestApp {
    pub url: String,
    pub http: reqwest::Client,
    pub worker: Worker,
    pub sender: OutboxSender,
    pub metrics: Metrics,
    /// The secret the server checks webhook signatures with.
    secret: Secret,
    /// The key it hashes message ids and erased identities with.
    pub privacy_key: balcao::domain::PrivacyKey,
    /// Dropping it stops the server.
    _stop: oneshot::Sender<()>,
}

impl TestApp {
    pub async fn spawn(db: &TestDb, config: Config) -> Self {
        Self::spawn_on(db.store.clone(), config).await
    }

    /// A server on `store` (one with a pool of its own size, say).
    pub async fn spawn_on(store: Store, config: Config) -> Self {
        let app = App::build(config.clone(), store).await.expect("build app");
        Self::start(app, &config).await
    }

    pub async fn spawn_with(
        db: &TestDb,
        config: Config,
        handler: impl FnOnce(HandlerContext) -> Arc<dyn TurnHandler>,
    ) -> Self {
        let app = App::build_with(config.clone(), db.store.clone(), handler).await.expect("build app");
        Self::start(app, &config).await
    }

    async fn start(app: App, config: &Config) -> Self {
        // Reached over loopback even when bound to every interface.
        let url = format!("http://127.0.0.1:{}", app.local_addr().expect("addr").port());
        let worker = app.worker().clone();
        let sender = app.sender().clone();
        let metrics = app.metrics.clone();
        let (stop, stopped) = oneshot::channel::<()>();
        tokio::spawn(app.run_http_only(async move {
            let _ = stopped.await;
        }));
        let secret = config.whatsapp.app_secret.clone();
        let privacy_key = config.whatsapp.privacy_key.clone();
        Self { url, http: reqwest::Client::new(), worker, sender, metrics, secret, privacy_key, _stop: stop }
    }

    /// POSTs `body` to the webhook, signed as Meta would.
    pub async fn post_webhook(&self, body: &[u8]) -> reqwest::Response {
        self.http
            .post(format!("{}/webhooks/whatsapp", self.url))
            .header("content-type", "application/json")
            .header("x-hub-signature-256", balcao::whatsapp::signature::sign(self.secret.expose().as_bytes(), body))
            .body(body.to_vec())
            .send()
            .await
            .expect("webhook request")
    }

    pub async fn get(&self, path: &str) -> reqwest::Response {
        self.http.get(format!("{}{path}", self.url)).send().await.expect("GET")
    }

    /// Runs every due turn as if `ahead` had passed (past any debounce), then stops.
    pub async fn drain_turns(&self) -> Vec<balcao::jobs::RunOutcome> {
        let later = chrono::Utc::now() + chrono::TimeDelta::seconds(60);
        let mut outcomes = Vec::new();
        loop {
            match self.worker.run_next_at(later).await.expect("run_next") {
                balcao::jobs::RunOutcome::Empty => return outcomes,
                other => outcomes.push(other),
            }
        }
    }

    /// Sends every due outbox row.
    pub async fn drain_outbox(&self) -> Vec<balcao::outbox::SendOutcome> {
        let mut outcomes = Vec::new();
        loop {
            match self.sender.send_next().await.expect("send_next") {
                balcao::outbox::SendOutcome::Empty => return outcomes,
                other => outcomes.push(other),
            }
        }
    }
}

/// Gateways with no secrets: enough for the sandbox.
pub fn sandbox_gateways() -> Arc<balcao::pix::Gateways> {
    Arc::new(balcao::pix::Gateways::new(Arc::new(balcao::pix::MapSecrets::default())))
}
