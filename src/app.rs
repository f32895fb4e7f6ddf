//! The application: HTTP edge, turn workers and outbox sender, built from a config and a
//! store, run until a shutdown future resolves.
//!
//! Invariants: local mode (no WhatsApp App Secret) is decided here, at start, for the whole
//! process: nothing is sent and every reply is stored local, whatever tenants change later.
//! Local mode listens on a loopback address unless `BALCAO_LOCAL_MODE_PUBLIC` opts out, since
//! its webhook secret is public. Background tasks are supervised: one that ends early is logged
//! and restarted.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use tokio::net::TcpListener;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::actions::{ClickHandler, run_expiry};
use crate::config::{AgentKind, Config};
use crate::http::{self, AppState};
use crate::inbound::GroupCommit;
use crate::jobs::{Replier, TurnHandler, Worker, WorkerPool};
use crate::llm::anthropic::AnthropicClient;
use crate::llm::openai::OpenAiClient;
use crate::llm::{ModelClient, RetryPolicy};
use crate::metrics::Metrics;
use crate::outbox::OutboxSender;
use crate::pix::Gateways;
use crate::store::{Store, TenantStore, TurnTiming};
use crate::transcription::Transcriber;
use crate::turns::{ByKind, HandlerContext, MessageKinds, Voice};
use crate::whatsapp::GraphClient;

/// The model client the configuration asks for, if any.
fn model_client(config: &Config) -> anyhow::Result<Option<(&'static str, Arc<dyn ModelClient>)>> {
    let timeout = config.agent.llm_timeout;
    Ok(match &config.agent.kind {
        AgentKind::Guided => None,
        AgentKind::Anthropic { api_key, model, base_url } => Some((
            "anthropic",
            Arc::new(AnthropicClient::new(base_url, api_key.clone(), model, timeout, RetryPolicy::default())?),
        )),
        AgentKind::OpenAi { api_key, model, base_url, parallel_tool_calls } => Some((
            "openai",
            Arc::new(OpenAiClient::new(
                base_url,
                api_key.clone(),
                model,
                *parallel_tool_calls,
                timeout,
                RetryPolicy::default(),
            )?),
        )),
    })
}

/// How often proposals and charges are expired and reminders sent: minutes matter here, not
/// milliseconds.
const SWEEP_EVERY: std::time::Duration = std::time::Duration::from_secs(15);
/// How often stored payment notifications due for another look are processed (new ones wake
/// the processor at once): a retry waits seconds, not a sweep; an idle pass is one indexed query.
const PAYMENTS_EVERY: std::time::Duration = std::time::Duration::from_secs(2);
/// Expired console sessions are never loaded; deleting them is housekeeping.
const SESSION_PRUNE_EVERY: std::time::Duration = std::time::Duration::from_secs(3600);
/// How often held bookings are looked at for a deposit to charge: the customer is waiting for
/// the Pix right after booking, and the look is one indexed query.
const DEPOSIT_REQUEST_EVERY: std::time::Duration = std::time::Duration::from_secs(2);

pub struct App {
    listener: TcpListener,
    router: axum::Router,
    worker: Worker,
    sender: OutboxSender,
    wake_workers: Arc<Notify>,
    config: Config,
    replier: Replier,
    gateways: Arc<Gateways>,
    wake_payments: Arc<Notify>,
    /// Cancelled when the server starts shutting down: ends long-lived responses (the
    /// simulator's event streams), so a graceful shutdown does not wait on open browser tabs.
    stopping: CancellationToken,
    /// The console's own connections (closed at the end, after the server's).
    console_store: Store,
    pub store: Store,
    pub metrics: Metrics,
}

impl App {
    /// Builds with the agent the configuration names (`AGENT`).
    pub async fn build(config: Config, store: Store) -> anyhow::Result<Self> {
        let model = model_client(&config)?;
        Self::build_with(config, store, move |ctx| crate::turns::chain(&ctx, model)).await
    }

    /// Binds the listener (port 0 picks a free one), checks the store and wires the parts.
    pub async fn build_with(
        config: Config,
        store: Store,
        handler: impl FnOnce(HandlerContext) -> Arc<dyn TurnHandler>,
    ) -> anyhow::Result<Self> {
        if !store.is_ready().await.context("failed to reach the database")? {
            anyhow::bail!("the database has pending migrations; run `balcao migrate`");
        }
        if config.whatsapp.local_mode && store.any_tenant_has_token().await? {
            anyhow::bail!(
                "a tenant has a WhatsApp access token but WHATSAPP_APP_SECRET is not set; \
                 set it so webhooks are verified with the real App Secret"
            );
        }
        let local_mode = config.whatsapp.local_mode;
        let loopback = config.addr.ip().to_canonical().is_loopback();
        if local_mode && !loopback && !config.whatsapp.local_mode_public {
            anyhow::bail!(
                "local mode (WHATSAPP_APP_SECRET unset) verifies webhooks with a public development secret, \
                 so it listens only on a loopback address, not BALCAO_ADDR={}; set WHATSAPP_APP_SECRET, \
                 bind 127.0.0.1, or set BALCAO_LOCAL_MODE_PUBLIC=1 to accept that anyone reaching the port \
                 can post messages",
                config.addr
            );
        }
        if local_mode {
            tracing::warn!(
                public = !loopback,
                "local mode: WHATSAPP_APP_SECRET is unset, webhooks are checked with the development secret and nothing is sent"
            );
        }
        let metrics = Metrics::new();
        let wake_workers = Arc::new(Notify::new());
        let wake_sender = Arc::new(Notify::new());
        let wake_payments = Arc::new(Notify::new());
        let default_token = config.whatsapp.access_token.clone();
        let replier = Replier::new(store.clone(), default_token.clone(), local_mode, wake_sender.clone());
        let gateways = Arc::new(Gateways::new(config.pix_secrets.0.clone()));
        let mut clicks = ClickHandler::new(store.clone(), replier.clone(), gateways.clone(), config.ledger.lease);
        clicks.executor = clicks.executor.with_metrics(metrics.clone());
        let clicks = Arc::new(clicks);
        let proposer = clicks.proposer.clone();
        let turns = handler(HandlerContext {
            store: store.clone(),
            replier: replier.clone(),
            config: config.clone(),
            proposer,
            clicks: clicks.clone(),
            metrics: metrics.clone(),
        });
        let client = GraphClient::new(&config.whatsapp.api_url, config.outbox.http_timeout)
            .context("failed to build the HTTP client")?;
        let transcriber = match &config.transcription {
            Some(t) => Some(
                Transcriber::new(&t.url, &t.model, t.api_key.clone(), t.timeout)
                    .context("failed to build the transcription client")?,
            ),
            None => None,
        };
        let voice = Arc::new(Voice {
            store: store.clone(),
            graph: client.clone(),
            default_token: default_token.clone(),
            transcriber,
        });
        // Every kind of message meets its policy first (reactions silent, voice notes heard).
        let turns: Arc<dyn TurnHandler> = Arc::new(MessageKinds { store: store.clone(), voice, inner: turns });
        // A click never reaches the turn handler (nor the model): it has its own path.
        let handler: Arc<dyn TurnHandler> = Arc::new(ByKind { clicks, turns });
        let worker = Worker::new(
            format!("{}-{}", std::process::id(), uuid::Uuid::new_v4().simple()),
            store.clone(),
            handler,
            config.queue.clone(),
            metrics.clone(),
        )
        .with_ledger_retention(config.ledger.retention)
        .with_outbox_wake(wake_sender.clone());
        let sender = OutboxSender::new(
            store.clone(),
            client,
            default_token,
            config.outbox.clone(),
            &config.queue,
            metrics.clone(),
            wake_sender,
            local_mode,
            config.whatsapp.privacy_key.clone(),
        );
        let secure_cookies = config.public_url.as_deref().is_some_and(|u| u.starts_with("https://"));
        let console_store = store.edge(crate::http::CONSOLE_CONNECTIONS);
        let stopping = CancellationToken::new();
        let state = AppState {
            store: store.clone(),
            console_store: console_store.clone(),
            password_checks: Default::default(),
            tenants: Default::default(),
            metrics: metrics.clone(),
            app_secret: config.whatsapp.app_secret.clone(),
            privacy_key: config.whatsapp.privacy_key.clone(),
            verify_token: config.whatsapp.verify_token.clone(),
            intake: GroupCommit::start(
                store.clone(),
                Arc::new(TurnTiming::from_config(&config.queue)),
                metrics.clone(),
                &config.intake,
            ),
            wake_workers: wake_workers.clone(),
            admin_token: config.admin_token.clone(),
            trusted_proxy_header: config.trusted_proxy_header.clone(),
            simulator_open: local_mode && loopback,
            replier: replier.clone(),
            gateways: gateways.clone(),
            wake_payments: wake_payments.clone(),
            csrf: crate::http::console::csrf_config(secure_cookies, &config.whatsapp.app_secret),
            secure_cookies,
            handoff_idle: crate::domain::to_delta(config.handoff_idle),
            stopping: stopping.clone(),
        };
        let listener =
            TcpListener::bind(config.addr).await.with_context(|| format!("failed to bind {}", config.addr))?;
        Ok(Self {
            listener,
            router: http::router(state),
            worker,
            sender,
            wake_workers,
            config,
            store,
            metrics,
            replier,
            gateways,
            wake_payments,
            stopping,
            console_store,
        })
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// The worker the pool clones; tests drive it step by step.
    pub fn worker(&self) -> &Worker {
        &self.worker
    }

    pub fn sender(&self) -> &OutboxSender {
        &self.sender
    }

    /// Serves and works until `shutdown` resolves; then stops accepting, lets in-flight turns
    /// finish up to the configured grace, and returns.
    pub async fn run_until_stopped(self, shutdown: impl Future<Output = ()> + Send + 'static) -> anyhow::Result<()> {
        self.serve(shutdown, true).await
    }

    /// Serves HTTP only; turns and sends are left to whoever calls `worker()` and `sender()`.
    pub async fn run_http_only(self, shutdown: impl Future<Output = ()> + Send + 'static) -> anyhow::Result<()> {
        self.serve(shutdown, false).await
    }

    async fn serve(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
        with_workers: bool,
    ) -> anyhow::Result<()> {
        let stop = CancellationToken::new();
        let pool = with_workers.then(|| {
            let mut pool = WorkerPool::start(&self.worker, self.wake_workers.clone(), stop.clone());
            let (store, replier, every, stop_expiry) =
                (self.store.clone(), self.replier.clone(), SWEEP_EVERY, stop.clone());
            pool.spawn("action-expiry".to_owned(), move || {
                run_expiry(store.clone(), replier.clone(), every, stop_expiry.clone())
            });
            let (store, replier, every, stop_reminders) =
                (self.store.clone(), self.replier.clone(), SWEEP_EVERY, stop.clone());
            pool.spawn("reminders".to_owned(), move || {
                crate::reminders::run(store.clone(), replier.clone(), every, stop_reminders.clone())
            });
            let (store, replier, gateways, wake, stop_payments) = (
                self.store.clone(),
                self.replier.clone(),
                self.gateways.clone(),
                self.wake_payments.clone(),
                stop.clone(),
            );
            pool.spawn("payments".to_owned(), move || {
                crate::money::payments::run_processor(
                    store.clone(),
                    replier.clone(),
                    gateways.clone(),
                    wake.clone(),
                    PAYMENTS_EVERY,
                    stop_payments.clone(),
                )
            });
            let deposits = Arc::new(
                crate::money::deposits::DepositRequests::new(
                    self.store.clone(),
                    self.replier.clone(),
                    self.gateways.clone(),
                    self.config.ledger.lease,
                )
                .with_metrics(self.metrics.clone()),
            );
            let (store, stop_deposits) = (self.store.clone(), stop.clone());
            pool.spawn("deposit-requests".to_owned(), move || {
                crate::money::deposits::run_requests(
                    deposits.clone(),
                    store.clone(),
                    DEPOSIT_REQUEST_EVERY,
                    stop_deposits.clone(),
                )
            });
            let (store, replier, stop_holds) = (self.store.clone(), self.replier.clone(), stop.clone());
            pool.spawn("deposit-expiry".to_owned(), move || {
                crate::money::deposits::run_expiry(store.clone(), replier.clone(), SWEEP_EVERY, stop_holds.clone())
            });
            let withdrawals = Arc::new(crate::money::charges::Withdrawals::new(
                self.store.clone(),
                self.replier.clone(),
                self.gateways.clone(),
                self.config.ledger.lease,
            ));
            let (store, stop_withdrawals) = (self.store.clone(), stop.clone());
            pool.spawn("charge-withdrawals".to_owned(), move || {
                crate::money::charges::run_withdrawals(
                    withdrawals.clone(),
                    store.clone(),
                    SWEEP_EVERY,
                    stop_withdrawals.clone(),
                )
            });
            let refunds = Arc::new(crate::money::refunds::Refunds::new(
                self.store.clone(),
                self.replier.clone(),
                self.gateways.clone(),
            ));
            let (store, stop_refunds) = (self.store.clone(), stop.clone());
            pool.spawn("refund-poll".to_owned(), move || {
                crate::money::refunds::run_refunds(refunds.clone(), store.clone(), SWEEP_EVERY, stop_refunds.clone())
            });
            let refund_sweep = Arc::new(crate::actions::RefundSweep::new(
                self.store.clone(),
                self.replier.clone(),
                self.gateways.clone(),
                self.config.ledger.lease,
            ));
            let (store, stop_offers) = (self.store.clone(), stop.clone());
            pool.spawn("refund-sweep".to_owned(), move || {
                crate::actions::run_refund_sweep(refund_sweep.clone(), store.clone(), SWEEP_EVERY, stop_offers.clone())
            });
            let (store, replier, gateways, stop_poller) =
                (self.store.clone(), self.replier.clone(), self.gateways.clone(), stop.clone());
            pool.spawn("charge-poller".to_owned(), move || {
                crate::money::payments::run_poller(
                    store.clone(),
                    replier.clone(),
                    gateways.clone(),
                    SWEEP_EVERY,
                    stop_poller.clone(),
                )
            });
            let (store, key, stop_scrub) = (self.store.clone(), self.config.whatsapp.privacy_key.clone(), stop.clone());
            pool.spawn("erasure-races".to_owned(), move || {
                crate::privacy::run_scrub(store.clone(), key.clone(), SWEEP_EVERY, stop_scrub.clone())
            });
            let (store, stop_sessions) = (self.store.clone(), stop.clone());
            pool.spawn("session-pruning".to_owned(), move || {
                crate::http::console::run_pruning(store.clone(), SESSION_PRUNE_EVERY, stop_sessions.clone())
            });
            // Local mode sends nothing, so it needs no sender (which would refuse anyway).
            // Senders claim rows atomically (one conversation's rows in order), as processes do.
            if !self.config.whatsapp.local_mode {
                for i in 0..self.config.outbox.senders {
                    let (sender, poll, stop) = (self.sender.clone(), self.config.queue.poll_interval, stop.clone());
                    pool.spawn(format!("outbox-sender-{i}"), move || sender.clone().run(poll, stop.clone()));
                }
            }
            pool
        });
        // Replays are counted in memory (`store::replays`); HTTP-only servers answer the
        // console's repeats too, so this runs in both modes.
        let replay_counts = tokio::spawn(crate::store::replays::flush_every(
            self.store.clone(),
            crate::store::replays::FLUSH_EVERY,
            stop.clone(),
        ));
        tracing::info!(addr = %self.listener.local_addr()?, backend = self.store.backend(), "balcão is listening");
        let (http_stop, streams) = (stop.clone(), self.stopping.clone());
        // The peer address is a console login's source (the throttle's key).
        let service = self.router.into_make_service_with_connect_info::<std::net::SocketAddr>();
        axum::serve(self.listener, service)
            .with_graceful_shutdown(async move {
                tokio::select! {
                    () = shutdown => {}
                    () = http_stop.cancelled() => {}
                }
                streams.cancel();
            })
            .await
            .context("HTTP server failed")?;
        tracing::info!("shutting down: finishing in-flight turns");
        if let Some(pool) = pool {
            pool.stop(self.config.shutdown_grace).await;
        }
        stop.cancel();
        if let Err(e) = replay_counts.await {
            tracing::warn!(error = %e, "the replay-count task ended badly");
        }
        self.console_store.close_edge().await;
        self.store.close().await;
        Ok(())
    }
}
