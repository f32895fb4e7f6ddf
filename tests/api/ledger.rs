//! The executor, row by row of the duplication table, and the failures seen in the anchors.
//! A probe tool stands in for a side effect: it counts runs and keeps an "outside system"
//! keyed by the ledger key, so a test can tell one effect from two.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use balcao::domain::LedgerKey;
use balcao::ledger::{
    CallContext, Effect, Fence, FieldKind, FieldSpec, KeyPolicy, LedgerState, Outcome, Reach, Tool, ToolCall,
    ToolFailure, ToolSpec,
};
use balcao::store::LedgerStore;
use chrono::TimeDelta;
use serde_json::{Value, json};
use tokio::sync::Semaphore;

use crate::contract;
use crate::support::common::TestDb;
use crate::support::scenario::{Customer, LEASE, Scenario, now};

#[derive(Clone)]
enum Behaviour {
    Succeed,
    Transient,
    Permanent,
    /// Creates the effect, then times out.
    UnknownAfterEffect,
    /// Never returns (a worker that died mid-call).
    Hang,
    /// Waits for a permit, then succeeds.
    Gate(Arc<Semaphore>),
    Slow(Duration),
}

const FIELDS: &[FieldSpec] = &[
    FieldSpec { name: "item", kind: FieldKind::Text, required: true, identity: true, description: "what" },
    FieldSpec { name: "amount", kind: FieldKind::Money, required: false, identity: false, description: "how much" },
];

static BUSINESS: ToolSpec = ToolSpec {
    name: "probe",
    description: "test effect",
    effect: Effect::Write { policy: KeyPolicy::Business, on_conflict: "use another tool", reach: Reach::Outside },
    fields: FIELDS,
};

static PER_TURN: ToolSpec = ToolSpec {
    name: "probe_turn",
    description: "test effect that may repeat in other turns",
    effect: Effect::Write { policy: KeyPolicy::PerTurn, on_conflict: "use another tool", reach: Reach::Outside },
    fields: FIELDS,
};

/// A tool whose effect is local: its row is claimed with the outcome, in one commit. (The probe
/// writes nothing of its own, so its row is stored after it returns.)
static LOCAL: ToolSpec = ToolSpec {
    name: "probe_local",
    description: "test effect in our own database",
    effect: Effect::Write { policy: KeyPolicy::Business, on_conflict: "use another tool", reach: Reach::Local },
    fields: FIELDS,
};

struct Probe {
    spec: &'static ToolSpec,
    runs: AtomicUsize,
    script: Mutex<VecDeque<Behaviour>>,
    attempts: Mutex<Vec<Seen>>,
    /// The outside system: effects created per key.
    effects: Mutex<HashMap<String, usize>>,
}

/// What a handler saw of its attempt: the generation it holds (none for a claim) and the
/// state it took over.
#[derive(Debug, Clone, Copy)]
struct Seen {
    generation: Option<i64>,
    previous: Option<LedgerState>,
}

impl Probe {
    fn new(spec: &'static ToolSpec, script: impl IntoIterator<Item = Behaviour>) -> Arc<Self> {
        Arc::new(Self {
            spec,
            runs: AtomicUsize::new(0),
            script: Mutex::new(script.into_iter().collect()),
            attempts: Mutex::default(),
            effects: Mutex::default(),
        })
    }
    fn runs(&self) -> usize {
        self.runs.load(Ordering::SeqCst)
    }
    fn effects(&self) -> usize {
        self.effects.lock().unwrap().values().sum()
    }
}

#[async_trait]
impl Tool for Probe {
    fn spec(&self) -> &'static ToolSpec {
        self.spec
    }

    async fn run(&self, call: &ToolCall<'_>) -> Result<Value, ToolFailure> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        let attempt = call.attempt.expect("writes carry their attempt");
        let generation = match attempt.fence {
            Fence::Held { held, .. } => Some(held.generation),
            Fence::Claim(_) => None,
        };
        self.attempts.lock().unwrap().push(Seen { generation, previous: attempt.previous });
        let key = call.key.expect("writes carry their key").as_str().to_owned();
        let behaviour = self.script.lock().unwrap().pop_front().unwrap_or(Behaviour::Succeed);
        let create = |probe: &Self| {
            let mut effects = probe.effects.lock().unwrap();
            // After an unknown outcome the handler looks the effect up before creating it.
            if attempt.previous == Some(LedgerState::OutcomeUnknown) && effects.contains_key(&key) {
                return;
            }
            *effects.entry(key.clone()).or_default() += 1;
        };
        let result =
            json!({ "item": call.args.str("item"), "amount": call.args.str("amount"), "generation": generation });
        match behaviour {
            Behaviour::Succeed => {}
            Behaviour::Transient => return Err(ToolFailure::Transient("gateway said 503".into())),
            Behaviour::Permanent => {
                return Err(ToolFailure::Permanent {
                    message: "declined".into(),
                    details: json!({ "code": "declined" }),
                });
            }
            Behaviour::UnknownAfterEffect => {
                create(self);
                return Err(ToolFailure::Unknown("gateway timed out".into()));
            }
            Behaviour::Hang => std::future::pending::<()>().await,
            Behaviour::Gate(gate) => drop(gate.acquire().await),
            Behaviour::Slow(d) => tokio::time::sleep(d).await,
        }
        create(self);
        Ok(result)
    }
}

fn ctx<'a>(
    s: &'a Scenario,
    c: &Customer,
    trigger: &'a str,
    tool_use_id: &'a str,
    at: chrono::DateTime<chrono::Utc>,
) -> CallContext<'a> {
    CallContext {
        trigger_message_id: Some(trigger),
        tool_use_id: Some(tool_use_id),
        ..CallContext::outside_turn(&s.tenant, c.contact, c.conversation, at)
    }
}

async fn run(
    s: &Scenario,
    c: &Customer,
    probe: &Probe,
    input: Value,
    trigger: &str,
    at: chrono::DateTime<chrono::Utc>,
) -> Outcome {
    s.executor.execute(probe, &ctx(s, c, trigger, "toolu_x", at), &input).await.unwrap()
}

/// Starts a call on another task and returns once its handler is running.
async fn start_in_background(
    s: &Arc<Scenario>,
    c: &Arc<Customer>,
    probe: &Arc<Probe>,
    input: &Value,
) -> tokio::task::JoinHandle<Outcome> {
    let (s, c, p, input) = (s.clone(), c.clone(), probe.clone(), input.clone());
    let task = tokio::spawn(async move { run(&s, &c, &p, input, "m1", now()).await });
    while probe.runs() == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    task
}

async fn row(db: &TestDb, s: &Scenario, c: &Customer) -> balcao::ledger::ExecutionRecord {
    let rows = db.store.executions_of_conversation(s.tenant.id, c.conversation).await.unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
    rows.into_iter().next().unwrap()
}

contract!(job_retried_after_the_tool_ran_gets_already_done, |db| async move {
    let s = Scenario::new(db).await;
    let c = s.customer(db, "5511999990001").await;
    let probe = Probe::new(&BUSINESS, []);
    let input = json!({ "item": "corte", "amount": "50" });
    let first = s.executor.execute(probe.as_ref(), &ctx(&s, &c, "m1", "toolu_A", now()), &input).await.unwrap();
    // The job is retried: the model, asked again, repeats the call with a new tool_use_id.
    let again = s.executor.execute(probe.as_ref(), &ctx(&s, &c, "m1", "toolu_B", now()), &input).await.unwrap();
    let Outcome::Executed(result) = &first else { panic!("{first:?}") };
    assert_eq!(again, Outcome::AlreadyDone(result.clone()));
    let shown = again.to_model_json();
    assert_eq!(shown["already_done"], true);
    assert_eq!(shown["item"], "corte");
    assert_eq!((probe.runs(), probe.effects()), (1, 1));
    let r = row(db, &s, &c).await;
    assert_eq!((r.status.as_str(), r.replay_count, r.tool_use_id.as_deref()), ("succeeded", 1, Some("toolu_A")));
});

/// Each row's stored replay count and, on PostgreSQL, its version (`xmin`), read behind the
/// store's back.
async fn stored_counts(db: &TestDb) -> Vec<(i64, String)> {
    let sql = if db.sqlite.is_some() {
        "SELECT replay_count, '' FROM agent_tool_executions ORDER BY id"
    } else {
        "SELECT replay_count, xmin::text FROM agent_tool_executions ORDER BY id"
    };
    crate::raw_pool!(db, pool => sqlx::query_as(sql).fetch_all(&pool).await.unwrap())
}

contract!(a_replay_writes_nothing_and_its_count_is_written_later, |db| async move {
    // A repeat reads the stored outcome: the row keeps its version and SQLite's writer commits
    // nothing. The count shows at once through the store and reaches the row with a flush.
    let s = Scenario::new(db).await;
    let c = s.customer(db, "5511999990001").await;
    let probes = [Probe::new(&BUSINESS, []), Probe::new(&LOCAL, [])];
    let input = json!({ "item": "corte" });
    for probe in &probes {
        assert!(matches!(run(&s, &c, probe, input.clone(), "m1", now()).await, Outcome::Executed(_)));
    }
    let (stored, commits) = (stored_counts(db).await, db.store.sqlite_commits());
    assert_eq!(stored.iter().map(|r| r.0).collect::<Vec<_>>(), [0, 0]);
    for _ in 0..3 {
        for probe in &probes {
            assert!(matches!(run(&s, &c, probe, input.clone(), "m2", now()).await, Outcome::AlreadyDone(_)));
        }
    }
    assert_eq!((stored_counts(db).await, db.store.sqlite_commits()), (stored.clone(), commits));
    let shown = |rows: Vec<balcao::ledger::ExecutionRecord>| rows.iter().map(|r| r.replay_count).collect::<Vec<_>>();
    let through_store = || db.store.executions_of_conversation(s.tenant.id, c.conversation);
    assert_eq!(shown(through_store().await.unwrap()), [3, 3]);

    assert_eq!(db.store.flush_replay_counts().await.unwrap(), 2);
    assert_eq!(stored_counts(db).await.iter().map(|r| r.0).collect::<Vec<_>>(), [3, 3]);
    assert_eq!(shown(through_store().await.unwrap()), [3, 3], "a flushed count is not counted twice");
    assert_eq!(db.store.flush_replay_counts().await.unwrap(), 0);

    // A running server writes them on its own.
    run(&s, &c, &probes[1], input.clone(), "m3", now()).await;
    let stop = tokio_util::sync::CancellationToken::new();
    let flusher =
        tokio::spawn(balcao::store::replays::flush_every(db.store.clone(), Duration::from_millis(10), stop.clone()));
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while stored_counts(db).await.iter().map(|r| r.0).collect::<Vec<_>>() != [3, 4] {
        assert!(std::time::Instant::now() < deadline, "{:?}", stored_counts(db).await);
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    stop.cancel();
    flusher.await.unwrap();
});

/// PostgreSQL only (SQLite's readers have a pool of their own, its writer no units): a flush
/// and a reader of ledger rows meeting a full pool wait for a connection, never on each other.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_a_full_pool_never_holds_a_flush_and_a_reader_on_each_other() {
    let Some(db) = TestDb::postgres().await else { return };
    let s = Scenario::new(&db).await;
    let c = s.customer(&db, "5511999990001").await;
    let probe = Probe::new(&BUSINESS, []);
    for _ in 0..2 {
        run(&s, &c, &probe, json!({ "item": "a" }), "m1", now()).await;
    }
    // Units hold every connection of the pool (the test database's has 8), idle.
    let mut releases = Vec::new();
    let mut parked = Vec::new();
    for _ in 0..8 {
        let (release, released) = tokio::sync::oneshot::channel::<()>();
        let (held, holding) = tokio::sync::oneshot::channel::<()>();
        let store = db.store.clone();
        parked.push(tokio::spawn(async move {
            store
                .unit(async {
                    store.connection_id().await.unwrap();
                    let _ = held.send(());
                    let _ = released.await;
                })
                .await
        }));
        holding.await.unwrap();
        releases.push(release);
    }
    // A flush asks for a connection first, then a reader; then one unit gives its connection back.
    let store = db.store.clone();
    let flush = tokio::spawn(async move { store.flush_replay_counts().await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let store = db.store.clone();
    let (tenant, conversation) = (s.tenant.id, c.conversation);
    let read = tokio::spawn(async move { store.executions_of_conversation(tenant, conversation).await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    drop(releases.pop());
    let read = tokio::time::timeout(Duration::from_secs(30), read).await.expect("the reader hung").unwrap();
    assert_eq!(read.expect("the reader waited out the pool's acquire timeout").len(), 1);
    flush.await.unwrap().unwrap();
    drop(releases);
    for unit in parked {
        unit.await.unwrap();
    }
    // The count reaches the row with a later flush, if that one had no connection in time.
    db.store.flush_replay_counts().await.unwrap();
    assert_eq!(stored_counts(&db).await.iter().map(|r| r.0).collect::<Vec<_>>(), [1]);
}

/// PostgreSQL only: SQLite has one writer and no row locks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_flush_skips_rows_a_transaction_holds_and_counts_them_later() {
    let Some(db) = TestDb::postgres().await else { return };
    let s = Scenario::new(&db).await;
    let c = s.customer(&db, "5511999990001").await;
    let probe = Probe::new(&BUSINESS, []);
    for item in ["a", "b"] {
        for expect_executed in [true, false] {
            let outcome = run(&s, &c, &probe, json!({ "item": item }), "m1", now()).await;
            assert_eq!(matches!(outcome, Outcome::Executed(_)), expect_executed, "{outcome:?}");
        }
    }
    let shown = || async {
        let rows = db.store.executions_of_conversation(s.tenant.id, c.conversation).await.unwrap();
        rows.iter().map(|r| r.replay_count).collect::<Vec<_>>()
    };
    let stored = || async { stored_counts(&db).await.iter().map(|r| r.0).collect::<Vec<_>>() };
    let first = db.store.executions_of_conversation(s.tenant.id, c.conversation).await.unwrap()[0].id;
    // Another transaction holds the first row (a takeover or a settle in flight).
    let (base, schema) = db.pg.as_ref().unwrap();
    let holder = sqlx::PgPool::connect_with(base.clone().options([("search_path", schema.as_str())])).await.unwrap();
    let mut tx = holder.begin().await.unwrap();
    sqlx::query("SELECT 1 FROM agent_tool_executions WHERE id = $1 FOR UPDATE")
        .bind(first)
        .execute(&mut *tx)
        .await
        .unwrap();
    // The flush waits for no one: it counts the free row and keeps the held one's count.
    let flushed = tokio::time::timeout(Duration::from_secs(10), db.store.flush_replay_counts()).await;
    assert_eq!(flushed.expect("the flush waited on a held row").unwrap(), 1);
    assert_eq!((stored().await, shown().await), (vec![0, 1], vec![1, 1]));
    tx.commit().await.unwrap();
    assert_eq!(db.store.flush_replay_counts().await.unwrap(), 1);
    assert_eq!((stored().await, shown().await), (vec![1, 1], vec![1, 1]));
    holder.close().await;
    db.cleanup().await;
}

contract!(identical_calls_in_one_response_run_once, |db| async move {
    let s = Scenario::new(db).await;
    let c = s.customer(db, "5511999990001").await;
    let probe = Probe::new(&BUSINESS, [Behaviour::Slow(Duration::from_millis(50))]);
    let input = json!({ "item": "corte" });
    let (a, b) =
        tokio::join!(run(&s, &c, &probe, input.clone(), "m1", now()), run(&s, &c, &probe, input.clone(), "m1", now()));
    assert_eq!(probe.runs(), 1);
    let executed = [&a, &b].iter().filter(|o| matches!(o, Outcome::Executed(_))).count();
    assert_eq!(executed, 1, "{a:?} {b:?}");
    assert!([&a, &b].iter().any(|o| matches!(o, Outcome::AlreadyInProgress | Outcome::AlreadyDone(_))));
});

contract!(per_turn_keys_repeat_only_in_a_new_turn, |db| async move {
    // "sim" sent twice in one turn is one confirmation; a later turn's "sim" is a new one.
    let s = Scenario::new(db).await;
    let c = s.customer(db, "5511999990001").await;
    let probe = Probe::new(&PER_TURN, []);
    let input = json!({ "item": "confirmar" });
    assert!(matches!(run(&s, &c, &probe, input.clone(), "wamid.sim1", now()).await, Outcome::Executed(_)));
    assert!(matches!(run(&s, &c, &probe, input.clone(), "wamid.sim1", now()).await, Outcome::AlreadyDone(_)));
    assert!(matches!(run(&s, &c, &probe, input.clone(), "wamid.sim2", now()).await, Outcome::Executed(_)));
    assert_eq!(probe.runs(), 2);
    // A per-turn key cannot be made without the turn's trigger.
    let mut no_trigger = ctx(&s, &c, "x", "toolu", now());
    no_trigger.trigger_message_id = None;
    assert!(s.executor.execute(probe.as_ref(), &no_trigger, &input).await.is_err());
});

contract!(a_later_turn_asking_again_gets_already_done, |db| async move {
    let s = Scenario::new(db).await;
    let c = s.customer(db, "5511999990001").await;
    let probe = Probe::new(&BUSINESS, []);
    let input = json!({ "item": "corte" });
    assert!(matches!(run(&s, &c, &probe, input.clone(), "wamid.turn1", now()).await, Outcome::Executed(_)));
    // "e aí, marcou?" hours later: another turn, the model books again.
    let later = now() + TimeDelta::hours(3);
    assert!(matches!(run(&s, &c, &probe, input.clone(), "wamid.turn7", later).await, Outcome::AlreadyDone(_)));
    assert_eq!(probe.runs(), 1);
    // Another customer asking for the same thing is another effect.
    let other = s.customer(db, "5511999990002").await;
    assert!(matches!(run(&s, &other, &probe, input, "wamid.other", later).await, Outcome::Executed(_)));
});

contract!(a_worker_dying_mid_tool_is_taken_over_after_the_lease, |db| async move {
    let s = Arc::new(Scenario::new(db).await);
    let c = Arc::new(s.customer(db, "5511999990001").await);
    let probe = Probe::new(&BUSINESS, [Behaviour::Hang]);
    let input = json!({ "item": "corte" });
    let doomed = start_in_background(&s, &c, &probe, &input).await;
    doomed.abort();
    let lease_end = now() + TimeDelta::from_std(LEASE).unwrap();
    assert_eq!(
        run(&s, &c, &probe, input.clone(), "m1", lease_end - TimeDelta::seconds(1)).await,
        Outcome::AlreadyInProgress
    );
    let taken = run(&s, &c, &probe, input.clone(), "m1", lease_end + TimeDelta::seconds(1)).await;
    assert!(matches!(&taken, Outcome::Executed(v) if v["generation"] == 2), "{taken:?}");
    let attempts = probe.attempts.lock().unwrap().clone();
    assert_eq!((attempts[1].generation, attempts[1].previous), (Some(2), Some(LedgerState::Running)));
    assert_eq!(probe.effects(), 1);
});

contract!(an_unknown_outcome_is_looked_up_before_creating_again, |db| async move {
    // The provider timed out after creating the charge: the retry must find it, not make another.
    let s = Scenario::new(db).await;
    let c = s.customer(db, "5511999990001").await;
    let probe = Probe::new(&BUSINESS, [Behaviour::UnknownAfterEffect]);
    let input = json!({ "item": "pix", "amount": "50.00" });
    let first = run(&s, &c, &probe, input.clone(), "m1", now()).await;
    assert!(matches!(&first, Outcome::Retryable { error } if error.contains("unknown")), "{first:?}");
    assert_eq!(row(db, &s, &c).await.status, "outcome_unknown");
    let second = run(&s, &c, &probe, input.clone(), "m1", now()).await;
    assert!(matches!(second, Outcome::Executed(_)));
    assert_eq!(probe.attempts.lock().unwrap()[1].previous, Some(LedgerState::OutcomeUnknown));
    assert_eq!((probe.runs(), probe.effects()), (2, 1));
});

contract!(takeover_happens_while_duplicates_keep_arriving, |db| async move {
    let s = Arc::new(Scenario::new(db).await);
    let c = Arc::new(s.customer(db, "5511999990001").await);
    let probe = Probe::new(&BUSINESS, [Behaviour::Hang]);
    let input = json!({ "item": "corte" });
    let doomed = start_in_background(&s, &c, &probe, &input).await;
    doomed.abort();
    let locked_until = row(db, &s, &c).await.locked_until;
    // A retrying caller every 10 s for the whole lease: none of them extends it.
    for n in 1..=11 {
        let at = now() + TimeDelta::seconds(10 * n);
        assert_eq!(run(&s, &c, &probe, input.clone(), "m1", at).await, Outcome::AlreadyInProgress);
    }
    let r = row(db, &s, &c).await;
    assert_eq!((r.locked_until, r.replay_count), (locked_until, 11));
    let taken = run(&s, &c, &probe, input, "m1", now() + TimeDelta::seconds(121)).await;
    assert!(matches!(taken, Outcome::Executed(_)), "{taken:?}");
    assert_eq!(probe.runs(), 2);
});

contract!(a_transient_failure_runs_again, |db| async move {
    let s = Scenario::new(db).await;
    let c = s.customer(db, "5511999990001").await;
    let probe = Probe::new(&BUSINESS, [Behaviour::Transient]);
    let input = json!({ "item": "corte" });
    let first = run(&s, &c, &probe, input.clone(), "m1", now()).await;
    assert!(matches!(&first, Outcome::Retryable { .. }) && first.is_error(), "{first:?}");
    assert_eq!(first.to_model_json()["retryable"], true);
    assert!(matches!(run(&s, &c, &probe, input, "m1", now()).await, Outcome::Executed(_)));
    assert_eq!(probe.runs(), 2);
    assert_eq!(row(db, &s, &c).await.generation, 2);
});

contract!(a_permanent_failure_replays_without_running, |db| async move {
    let s = Scenario::new(db).await;
    let c = s.customer(db, "5511999990001").await;
    let probe = Probe::new(&BUSINESS, [Behaviour::Permanent]);
    let input = json!({ "item": "corte" });
    let first = run(&s, &c, &probe, input.clone(), "m1", now()).await;
    let again = run(&s, &c, &probe, input, "m1", now() + TimeDelta::hours(1)).await;
    assert_eq!(first, Outcome::Failed { error: "declined".into(), details: json!({ "code": "declined" }) });
    assert_eq!(again, first);
    assert_eq!(probe.runs(), 1);
});

contract!(a_changed_amount_under_the_same_key_is_a_conflict, |db| async move {
    let s = Scenario::new(db).await;
    let c = s.customer(db, "5511999990001").await;
    let probe = Probe::new(&BUSINESS, []);
    assert!(matches!(
        run(&s, &c, &probe, json!({ "item": "corte", "amount": "50" }), "m1", now()).await,
        Outcome::Executed(_)
    ));
    let changed = run(&s, &c, &probe, json!({ "item": "Corte ", "amount": "60,00" }), "m1", now()).await;
    let Outcome::Conflict { existing, hint, .. } = &changed else { panic!("{changed:?}") };
    assert_eq!(existing, &json!({ "item": "corte", "amount": "50.00" }));
    assert_eq!(*hint, "use another tool");
    let shown = changed.to_model_json();
    assert_eq!((shown["conflict"].clone(), shown["existing_result"]["amount"].clone()), (json!(true), json!("50.00")));
    assert_eq!(probe.runs(), 1);
});

contract!(a_worker_whose_lease_expired_cannot_store_its_outcome, |db| async move {
    let s = Arc::new(Scenario::new(db).await);
    let c = Arc::new(s.customer(db, "5511999990001").await);
    let gate = Arc::new(Semaphore::new(0));
    let probe = Probe::new(&BUSINESS, [Behaviour::Gate(gate.clone())]);
    let input = json!({ "item": "corte" });
    let zombie = start_in_background(&s, &c, &probe, &input).await;
    let heir = run(&s, &c, &probe, input, "m1", now() + TimeDelta::seconds(121)).await;
    assert!(matches!(&heir, Outcome::Executed(v) if v["generation"] == 2));
    gate.add_permits(1);
    assert_eq!(zombie.await.unwrap(), Outcome::AlreadyInProgress, "the zombie must not report or store its outcome");
    let r = row(db, &s, &c).await;
    assert_eq!((r.generation, r.result.unwrap().0["generation"].clone()), (2, json!(2)));
    // The zombie cannot settle or renew with its old generation either.
    let settled = balcao::store::Settlement {
        state: LedgerState::Succeeded,
        result: Some(&json!({"zombie": true})),
        error: None,
    };
    assert!(!db.store.settle_execution(s.tenant.id, r.id, 1, &settled, now()).await.unwrap());
    assert!(!db.store.renew_execution(s.tenant.id, r.id, 1, now(), now() + TimeDelta::minutes(5)).await.unwrap());
});

contract!(thirty_two_concurrent_calls_run_the_handler_once, |db| async move {
    let s = Arc::new(Scenario::new(db).await);
    let c = Arc::new(s.customer(db, "5511999990001").await);
    let probe = Probe::new(&BUSINESS, [Behaviour::Slow(Duration::from_millis(100))]);
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..32 {
        let (s, c, probe) = (s.clone(), c.clone(), probe.clone());
        tasks.spawn(async move { run(&s, &c, &probe, json!({ "item": "corte", "amount": "50" }), "m1", now()).await });
    }
    let mut outcomes = Vec::new();
    while let Some(o) = tasks.join_next().await {
        outcomes.push(o.unwrap());
    }
    assert_eq!(probe.runs(), 1);
    let executed: Vec<_> =
        outcomes.iter().filter_map(|o| if let Outcome::Executed(v) = o { Some(v) } else { None }).collect();
    assert_eq!(executed.len(), 1);
    for o in &outcomes {
        match o {
            Outcome::Executed(_) | Outcome::AlreadyInProgress => {}
            Outcome::AlreadyDone(v) => assert_eq!(v, executed[0]),
            other => panic!("inconsistent outcome {other:?}"),
        }
    }
    // Once settled, everyone gets the same answer.
    assert_eq!(
        run(&s, &c, &probe, json!({ "item": "corte", "amount": "50" }), "m2", now()).await,
        Outcome::AlreadyDone(executed[0].clone())
    );
});

contract!(keys_ignore_formatting_order_and_tool_use_id, |db| async move {
    let s = Scenario::new(db).await;
    let c = s.customer(db, "5511999990001").await;
    let book = |starts_at: &str, order: bool| {
        if order {
            json!({ "service_id": s.corte, "professional_id": s.ze, "starts_at": starts_at })
        } else {
            json!({ "starts_at": starts_at, "professional_id": s.ze.to_string(), "service_id": s.corte })
        }
    };
    let first = s.call(&c, "create_booking", book("2026-03-11T14:00:00-03:00", true)).await;
    assert!(matches!(first, Outcome::Executed(_)), "{first:?}");
    for (raw, order) in
        [("2026-03-11 17:00Z", false), ("2026-03-11T17:00:00Z", true), ("2026-03-11T13:00-04:00", false)]
    {
        let again = s.call(&c, "create_booking", book(raw, order)).await;
        assert!(matches!(again, Outcome::AlreadyDone(_)), "{raw}: {again:?}");
    }
    assert_eq!(db.store.executions_of_conversation(s.tenant.id, c.conversation).await.unwrap().len(), 1);
    let key =
        db.store.executions_of_conversation(s.tenant.id, c.conversation).await.unwrap()[0].idempotency_key.clone();
    assert!(key.starts_with("create_booking/v2/"), "{key}");
    let stored = db.store.execution(s.tenant.id, &LedgerKey::from_stored(key)).await.unwrap();
    assert_eq!(stored.map(|r| r.status), Some("succeeded".to_owned()), "the stored key finds its row");
});

contract!(bad_input_is_refused_and_nothing_runs, |db| async move {
    let s = Scenario::new(db).await;
    let c = s.customer(db, "5511999990001").await;
    for input in [
        json!({ "service_id": s.corte, "professional_id": s.ze }),
        json!({ "service_id": s.corte, "professional_id": s.ze, "starts_at": "2026-03-11T14:00:00" }),
        json!({ "service_id": "corte", "professional_id": s.ze, "starts_at": "2026-03-11T14:00:00-03:00" }),
        json!({ "service_id": s.corte, "professional_id": s.ze, "starts_at": "2026-03-11T14:00:00-03:00", "notes": "x" }),
        json!("book me"),
    ] {
        let outcome = s.call(&c, "create_booking", input.clone()).await;
        assert!(matches!(outcome, Outcome::Invalid(_)), "{input}: {outcome:?}");
        assert!(outcome.is_error());
    }
    assert!(db.store.executions_of_conversation(s.tenant.id, c.conversation).await.unwrap().is_empty());
});

contract!(settled_rows_are_pruned_after_retention_but_open_ones_stay, |db| async move {
    let s = Scenario::new(db).await;
    let c = s.customer(db, "5511999990001").await;
    let probe = Probe::new(&BUSINESS, [Behaviour::Succeed, Behaviour::UnknownAfterEffect]);
    run(&s, &c, &probe, json!({ "item": "a" }), "m1", now()).await;
    run(&s, &c, &probe, json!({ "item": "b" }), "m1", now()).await;
    assert_eq!(db.store.prune_executions(now() - TimeDelta::days(1)).await.unwrap(), 0);
    assert_eq!(db.store.prune_executions(now() + TimeDelta::days(31)).await.unwrap(), 1);
    let left = db.store.executions_of_conversation(s.tenant.id, c.conversation).await.unwrap();
    assert_eq!(left.iter().map(|r| r.status.as_str()).collect::<Vec<_>>(), ["outcome_unknown"]);
});

contract!(a_later_attempt_of_the_same_turn_takes_its_call_over_at_once, |db| async move {
    // The first attempt of turn 7 reserved the key and died; its ledger lease still runs.
    let s = Arc::new(Scenario::new(db).await);
    let c = Arc::new(s.customer(db, "5511999990001").await);
    let probe = Probe::new(&BUSINESS, [Behaviour::Hang]);
    let input = json!({ "item": "corte" });
    let in_turn = |turn: i64, attempt: i64| {
        let mut ctx = ctx(&s, &c, "m1", "toolu_x", now() + TimeDelta::seconds(5));
        ctx.turn = Some(balcao::domain::JobId(turn));
        ctx.turn_attempt = Some(attempt);
        ctx
    };
    let doomed = {
        let (s2, c2, p2, input) = (s.clone(), c.clone(), probe.clone(), input.clone());
        tokio::spawn(async move {
            let mut ctx = ctx(&s2, &c2, "m1", "toolu_a", now());
            ctx.turn = Some(balcao::domain::JobId(7));
            ctx.turn_attempt = Some(1);
            s2.executor.execute(p2.as_ref(), &ctx, &input).await.unwrap()
        })
    };
    while probe.runs() == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    doomed.abort();
    // Another turn still waits for the lease; the same attempt again does too.
    let other = s.executor.execute(probe.as_ref(), &in_turn(8, 1), &input).await.unwrap();
    assert_eq!(other, Outcome::AlreadyInProgress);
    let same = s.executor.execute(probe.as_ref(), &in_turn(7, 1), &input).await.unwrap();
    assert_eq!(same, Outcome::AlreadyInProgress);
    // The retry of turn 7 takes over at once and is told the earlier attempt's state.
    let retried = s.executor.execute(probe.as_ref(), &in_turn(7, 2), &input).await.unwrap();
    assert!(matches!(&retried, Outcome::Executed(v) if v["generation"] == 2), "{retried:?}");
    let attempts = probe.attempts.lock().unwrap().clone();
    assert_eq!((attempts[1].generation, attempts[1].previous), (Some(2), Some(LedgerState::Running)));
    assert_eq!(probe.effects(), 1);
    let stored = row(db, &s, &c).await;
    assert_eq!((stored.status.as_str(), stored.turn_attempt), ("succeeded", Some(2)));
});

// Attempt 2 of turn 9 (the job's retry) ran the call and failed for now; attempt 1, replaced
// but not yet stopped, makes the same call afterwards. It must not take the row over: attempt
// 2's turn may be over, and attempt 1 is stopped when it notices its lost job lease, which
// would leave the row running with no one to come back to it (the campaign found one such row).
contract!(an_attempt_replaced_by_a_later_one_takes_nothing_over_from_it, |db| async move {
    let s = Scenario::new(db).await;
    let c = s.customer(db, "5511999990001").await;
    let probe = Probe::new(&BUSINESS, [Behaviour::Transient, Behaviour::Succeed]);
    let input = json!({ "item": "corte" });
    let in_turn = |attempt: i64| {
        let mut ctx = ctx(&s, &c, "m1", "toolu_x", now());
        ctx.turn = Some(balcao::domain::JobId(9));
        ctx.turn_attempt = Some(attempt);
        ctx
    };
    let later = s.executor.execute(probe.as_ref(), &in_turn(2), &input).await.unwrap();
    assert!(matches!(later, Outcome::Retryable { .. }), "{later:?}");
    let stale = s.executor.execute(probe.as_ref(), &in_turn(1), &input).await.unwrap();
    assert_eq!(stale, Outcome::AlreadyInProgress);
    assert_eq!(row(db, &s, &c).await.status, "failed_transient", "left as attempt 2 settled it");
    // The later attempt's own retry (or any later one) still may.
    let retried = s.executor.execute(probe.as_ref(), &in_turn(3), &input).await.unwrap();
    assert!(matches!(retried, Outcome::Executed(_)), "{retried:?}");
    assert_eq!(probe.effects(), 1);
});

contract!(a_local_effect_stores_its_outcome_with_one_row_whatever_the_path, |db| async move {
    let s = Arc::new(Scenario::new(db).await);
    let c = Arc::new(s.customer(db, "5511999990001").await);
    let probe = Probe::new(&LOCAL, [Behaviour::Transient, Behaviour::Permanent]);
    let (corte, barba) = (json!({ "item": "corte", "amount": "50" }), json!({ "item": "barba" }));
    // A transient failure leaves no row (nothing happened); the next call runs the handler.
    let first = run(&s, &c, &probe, corte.clone(), "m1", now()).await;
    assert!(matches!(first, Outcome::Retryable { .. }), "{first:?}");
    assert!(db.store.executions_of_conversation(s.tenant.id, c.conversation).await.unwrap().is_empty());
    // A permanent failure is stored and replayed without running again.
    let declined = run(&s, &c, &probe, corte.clone(), "m1", now()).await;
    assert_eq!(run(&s, &c, &probe, corte.clone(), "m1", now()).await, declined);
    assert_eq!((probe.runs(), row(db, &s, &c).await.status), (2, "failed_permanent".to_owned()));
    // A fresh row for a changed request (a failure left nothing behind), then a conflict.
    let amended = json!({ "item": "corte", "amount": "55" });
    assert!(matches!(run(&s, &c, &probe, amended, "m1", now()).await, Outcome::Executed(_)));
    assert!(matches!(run(&s, &c, &probe, corte, "m1", now()).await, Outcome::Conflict { .. }));

    // Sixteen identical calls at once: one is executed, the others are answered from its row.
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..16 {
        let (s, c, probe, barba) = (s.clone(), c.clone(), probe.clone(), barba.clone());
        tasks.spawn(async move { run(&s, &c, &probe, barba, "m1", now()).await });
    }
    let mut outcomes = Vec::new();
    while let Some(outcome) = tasks.join_next().await {
        outcomes.push(outcome.unwrap());
    }
    let executed = outcomes.iter().filter(|o| matches!(o, Outcome::Executed(_))).count();
    let replayed = outcomes.iter().filter(|o| matches!(o, Outcome::AlreadyDone(_))).count();
    assert_eq!((executed, replayed), (1, 15), "{outcomes:?}");
    let rows = db.store.executions_of_conversation(s.tenant.id, c.conversation).await.unwrap();
    assert_eq!(rows.iter().filter(|r| r.arguments.0["item"] == "barba").count(), 1);
});
