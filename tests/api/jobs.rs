//! The turn queue at the store level, with explicit clocks: debounce, ordering, leases,
//! fencing, retries, turn identity and pruning.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use balcao::jobs::{RunOutcome, Turn, TurnHandler, Worker};
use balcao::metrics::Metrics;
use balcao::store::{FailOutcome, InboundStore, JobState, JobStore, TurnTiming};
use chrono::{DateTime, TimeDelta, Utc};

use crate::contract;
use crate::support::common::{TestDb, test_config};
use crate::support::queue::{message, record, timing};

fn t0() -> DateTime<Utc> {
    // Microsecond precision, as PostgreSQL stores it.
    DateTime::from_timestamp_micros(Utc::now().timestamp_micros()).unwrap()
}

fn secs(n: i64) -> TimeDelta {
    TimeDelta::seconds(n)
}

contract!(debounce_groups_messages_and_caps_the_delay, |db| async move {
    let tenant = db.tenant().await;
    let t = timing(3, 5, 5);
    let now = t0();
    let (conv, job) = record(&db.store, &tenant, "m1", "5511999990001", &t, now).await;
    let run_at = |db: &TestDb| {
        let store = db.store.clone();
        async move { store.job(tenant.id, job).await.unwrap().unwrap().run_at }
    };
    assert_eq!(run_at(db).await, now + secs(3));
    let (_, same) = record(&db.store, &tenant, "m2", "5511999990001", &t, now + secs(1)).await;
    assert_eq!(same, job);
    assert_eq!(run_at(db).await, now + secs(4));
    let (_, same) = record(&db.store, &tenant, "m3", "5511999990001", &t, now + secs(4)).await;
    assert_eq!(same, job);
    assert_eq!(run_at(db).await, now + secs(5), "capped at the first message + 5 s");

    // Not due before run_at.
    assert!(db.store.claim_next("w", now + secs(4), now + secs(60)).await.unwrap().is_none());
    let claimed = db.store.claim_next("w", now + secs(5), now + secs(65)).await.unwrap().unwrap();
    assert_eq!(claimed.id, job);
    assert_eq!(claimed.conversation, conv);
    assert_eq!(db.store.turn_messages(tenant.id, job).await.unwrap().len(), 3);

    // Once running, a new message starts a new turn, which waits for the running one.
    let (_, next) = record(&db.store, &tenant, "m4", "5511999990001", &t, now + secs(6)).await;
    assert_ne!(next, job);
    assert!(db.store.claim_next("w2", now + secs(30), now + secs(90)).await.unwrap().is_none());
    assert!(db.store.complete(&claimed.lease, now + secs(7)).await.unwrap());
    let second = db.store.claim_next("w2", now + secs(30), now + secs(90)).await.unwrap().unwrap();
    assert_eq!(second.id, next);
    let msgs = db.store.turn_messages(tenant.id, next).await.unwrap();
    assert_eq!(msgs.iter().map(|m| m.provider_message_id.as_str()).collect::<Vec<_>>(), ["m4"]);
});

contract!(other_conversations_proceed_in_parallel, |db| async move {
    let tenant = db.tenant().await;
    let t = timing(0, 0, 5);
    let now = t0();
    let (_, a) = record(&db.store, &tenant, "a1", "5511999990001", &t, now).await;
    let (_, b) = record(&db.store, &tenant, "b1", "5511999990002", &t, now).await;
    let first = db.store.claim_next("w1", now, now + secs(60)).await.unwrap().unwrap();
    let second = db.store.claim_next("w2", now, now + secs(60)).await.unwrap().unwrap();
    let mut ids = vec![first.id, second.id];
    ids.sort();
    assert_eq!(ids, vec![a, b]);
    assert!(db.store.claim_next("w3", now, now + secs(60)).await.unwrap().is_none());
});

contract!(turn_identity_and_messages_are_fixed_at_first_claim, |db| async move {
    let tenant = db.tenant().await;
    let t = timing(0, 0, 5);
    let now = t0();
    let (_, job) = record(&db.store, &tenant, "m1", "5511999990001", &t, now).await;
    record(&db.store, &tenant, "m2", "5511999990001", &t, now).await;
    let first = db.store.claim_next("w1", now, now + secs(60)).await.unwrap().unwrap();
    assert_eq!(first.attempt, 1);
    assert_eq!(first.trigger_message_id.as_deref(), Some("m2"));

    // A message arrives while the turn is failing; it belongs to the next turn.
    let (_, later) = record(&db.store, &tenant, "m3", "5511999990001", &t, now + secs(1)).await;
    let outcome = db.store.fail(&first.lease, "model down", false, now + secs(2), now + secs(1)).await.unwrap();
    assert_eq!(outcome, Some(FailOutcome::WillRetry));

    // The retry comes first (older), with the same identity and messages.
    let retry = db.store.claim_next("w2", now + secs(3), now + secs(63)).await.unwrap().unwrap();
    assert_eq!(retry.id, job);
    assert_eq!(retry.attempt, 2);
    assert_eq!(retry.trigger_message_id.as_deref(), Some("m2"));
    let ids: Vec<_> =
        db.store.turn_messages(tenant.id, job).await.unwrap().into_iter().map(|m| m.provider_message_id).collect();
    assert_eq!(ids, ["m1", "m2"]);
    assert!(db.store.complete(&retry.lease, now + secs(4)).await.unwrap());

    let next = db.store.claim_next("w2", now + secs(5), now + secs(65)).await.unwrap().unwrap();
    assert_eq!(next.id, later);
    assert_eq!(next.trigger_message_id.as_deref(), Some("m3"));
});

contract!(a_worker_that_lost_its_lease_cannot_finish, |db| async move {
    let tenant = db.tenant().await;
    let t = timing(0, 0, 5);
    let now = t0();
    let (_, job) = record(&db.store, &tenant, "m1", "5511999990001", &t, now).await;
    let zombie = db.store.claim_next("zombie", now, now + secs(30)).await.unwrap().unwrap();
    assert!(db.store.heartbeat(&zombie.lease, now + secs(10), now + secs(40)).await.unwrap());
    // The zombie stops renewing; its lease runs out and the reaper takes the job back.
    let reaped = db.store.reap_expired(now + secs(41)).await.unwrap();
    assert_eq!(reaped, vec![(job, JobState::Retryable)]);
    let heir = db.store.claim_next("heir", now + secs(41), now + secs(71)).await.unwrap().unwrap();
    assert_eq!(heir.id, job);

    assert!(!db.store.heartbeat(&zombie.lease, now + secs(42), now + secs(72)).await.unwrap());
    assert!(!db.store.complete(&zombie.lease, now + secs(42)).await.unwrap());
    assert_eq!(db.store.fail(&zombie.lease, "late", false, now, now + secs(42)).await.unwrap(), None);
    // An expired lease cannot complete either, even before anyone reaped it.
    assert!(!db.store.complete(&heir.lease, now + secs(72)).await.unwrap());
    let snapshot = db.store.job(tenant.id, job).await.unwrap().unwrap();
    assert_eq!((snapshot.state.as_str(), snapshot.locked_by.as_deref()), ("running", Some("heir")));
});

contract!(exhausted_attempts_bury_the_job_with_its_error, |db| async move {
    let tenant = db.tenant().await;
    let t = timing(0, 0, 2);
    let now = t0();
    let (_, job) = record(&db.store, &tenant, "m1", "5511999990001", &t, now).await;
    let a1 = db.store.claim_next("w", now, now + secs(30)).await.unwrap().unwrap();
    assert_eq!(
        db.store.fail(&a1.lease, "boom 1", false, now + secs(10), now).await.unwrap(),
        Some(FailOutcome::WillRetry)
    );
    assert!(db.store.claim_next("w", now + secs(9), now + secs(39)).await.unwrap().is_none(), "backoff respected");
    let a2 = db.store.claim_next("w", now + secs(10), now + secs(40)).await.unwrap().unwrap();
    assert_eq!(
        db.store.fail(&a2.lease, "boom 2", false, now + secs(20), now + secs(10)).await.unwrap(),
        Some(FailOutcome::Dead)
    );
    let s = db.store.job(tenant.id, job).await.unwrap().unwrap();
    assert_eq!((s.state.as_str(), s.attempts, s.last_error.as_deref()), ("dead", 2, Some("boom 2")));
    assert!(db.store.claim_next("w", now + secs(100), now + secs(130)).await.unwrap().is_none());

    // A lease that expires on the last attempt is buried by the reaper too.
    let (_, other) = record(&db.store, &tenant, "x1", "5511999990009", &timing(0, 0, 1), now).await;
    db.store.claim_next("w", now, now + secs(30)).await.unwrap().unwrap();
    assert_eq!(db.store.reap_expired(now + secs(31)).await.unwrap(), vec![(other, JobState::Dead)]);
});

contract!(finished_jobs_are_pruned_after_retention, |db| async move {
    let tenant = db.tenant().await;
    let t = timing(0, 0, 5);
    let now = t0();
    let (_, job) = record(&db.store, &tenant, "m1", "5511999990001", &t, now).await;
    let c = db.store.claim_next("w", now, now + secs(30)).await.unwrap().unwrap();
    assert!(db.store.complete(&c.lease, now + secs(1)).await.unwrap());
    record(&db.store, &tenant, "m2", "5511999990002", &t, now).await; // still available: kept
    assert_eq!(db.store.prune_finished(now).await.unwrap(), 0);
    assert_eq!(db.store.prune_finished(now + secs(2)).await.unwrap(), 1);
    assert!(db.store.job(tenant.id, job).await.unwrap().is_none());
    assert_eq!(db.store.count_jobs(tenant.id).await.unwrap(), 1);
});

/// Fails the first `failures` calls, then succeeds.
struct Flaky {
    failures: usize,
    calls: AtomicUsize,
}

#[async_trait]
impl TurnHandler for Flaky {
    async fn handle(&self, _turn: &Turn) -> anyhow::Result<()> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst);
        if n < self.failures {
            anyhow::bail!("transient failure {n}");
        }
        Ok(())
    }
}

contract!(worker_retries_with_backoff_then_completes, |db| async move {
    let tenant = db.tenant().await;
    let config = test_config("http://127.0.0.1:9", &[("BALCAO_JOB_BACKOFF_BASE_MS", "10000")]);
    let handler = Arc::new(Flaky { failures: 2, calls: AtomicUsize::new(0) });
    let metrics = Metrics::new();
    let worker = Worker::new("w".into(), db.store.clone(), handler.clone(), config.queue.clone(), metrics.clone());
    let now = t0();
    let (_, job) =
        record(&db.store, &tenant, "m1", "5511999990001", &TurnTiming::from_config(&config.queue), now).await;
    let later = now + secs(60);
    assert_eq!(worker.run_next_at(later).await.unwrap(), RunOutcome::WillRetry(job));
    let s = db.store.job(tenant.id, job).await.unwrap().unwrap();
    let delay = s.run_at - later;
    assert!(delay >= secs(5) && delay <= secs(11), "first backoff {delay}");
    assert_eq!(worker.run_next_at(later).await.unwrap(), RunOutcome::Empty, "not before the backoff");
    assert_eq!(worker.run_next_at(later + secs(11)).await.unwrap(), RunOutcome::WillRetry(job));
    let s = db.store.job(tenant.id, job).await.unwrap().unwrap();
    let delay = s.run_at - (later + secs(11));
    assert!(delay >= secs(10) && delay <= secs(21), "second backoff {delay}");
    assert_eq!(s.last_error.as_deref(), Some("transient failure 1"));
    assert_eq!(worker.run_next_at(later + secs(40)).await.unwrap(), RunOutcome::Completed(job));
    assert_eq!(handler.calls.load(Ordering::SeqCst), 3);
    assert_eq!((metrics.jobs_claimed.get(), metrics.jobs_retried.get(), metrics.jobs_completed.get()), (3, 2, 1));
});

/// Rows that wait in each queue without being due.
const NOT_DUE: usize = 3_000;

contract!(idle_polls_walk_their_queue_index_however_long_the_queue, |db| async move {
    let tenant = db.tenant().await;
    let conversation =
        db.store.ensure_conversation(tenant.id, &message("probe", "5511966660001").contact, Utc::now()).await.unwrap();
    // Thousands of retries, sends and payment notifications waiting for a later time: a poll
    // that reads them all (a sequential scan stopping at the first due row, when none is) costs
    // the database a table's read per idle worker and interval.
    let later = Utc::now() + TimeDelta::hours(1);
    crate::raw_pool!(db, pool => {
        for i in 0..NOT_DUE {
            for (sql, key) in [
                ("INSERT INTO jobs (tenant_id, conversation_id, state, run_at, debounce_deadline, max_attempts,
                                   created_at, updated_at)
                  VALUES ($1, $2, 'retryable', $3, $3, 5, $3, $3)", None),
                ("INSERT INTO outbound_messages (tenant_id, conversation_id, idempotency_key, message, status,
                                                next_attempt_at, created_at, updated_at)
                  VALUES ($1, $2, $4, '{}', 'pending', $3, $3, $3)", Some(format!("k{i}"))),
                ("INSERT INTO payment_events (tenant_id, provider, event_id, ref_kind, charge_ref, status,
                                             next_attempt_at, received_at)
                  VALUES ($1, 'sandbox', $4, 'txid', $4, 'received', $3, $3)", Some(format!("e{i}"))),
            ] {
                let query = sqlx::query(sql).bind(tenant.id.0).bind(conversation.0).bind(later);
                query.bind(key).execute(&pool).await.unwrap();
            }
        }
        sqlx::query("ANALYZE").execute(&pool).await.unwrap();
        let mut conn = pool.acquire().await.unwrap();
        for (table, sql) in balcao::store::due::ALL {
            let plan: Vec<String> = if db.sqlite.is_some() {
                let rows: Vec<(i64, i64, i64, String)> =
                    sqlx::query_as(sqlx::AssertSqlSafe(format!("EXPLAIN QUERY PLAN {sql}"))).bind(Utc::now()).fetch_all(&mut *conn).await.unwrap();
                rows.into_iter().map(|r| r.3).collect()
            } else {
                // The plan a pooled connection may keep: the generic one, for any `now`.
                sqlx::query("SET plan_cache_mode = force_generic_plan").execute(&mut *conn).await.unwrap();
                sqlx::query(sqlx::AssertSqlSafe(format!("PREPARE due_probe(timestamptz) AS {sql}"))).execute(&mut *conn).await.unwrap();
                let plan = sqlx::query_scalar("EXPLAIN EXECUTE due_probe(now())").fetch_all(&mut *conn).await.unwrap();
                sqlx::query("DEALLOCATE due_probe").execute(&mut *conn).await.unwrap();
                plan
            };
            let plan = plan.join("\n");
            assert!(plan.contains(&format!("{table}_due")) && !plan.contains("Seq Scan"), "{table}: {plan}");
        }
    });
});
