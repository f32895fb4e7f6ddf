//! Units of work (`store::unit`): on PostgreSQL a unit's statements share one connection, a
//! transaction that fails inside a unit is rolled back before that connection serves anything
//! else, and a busy unit connection never makes a statement wait. On SQLite a unit changes
//! nothing, and the same steps must hold.

use std::time::Duration;

use balcao::store::{BookingError, BookingStore};
use chrono::{TimeZone, Utc};

use crate::contract;
use crate::support::scenario::Scenario;

contract!(a_unit_runs_on_one_connection_and_outlives_a_failed_transaction, |db| async move {
    let s = Scenario::new(db).await;
    let c = s.customer(db, "5511999990001").await;
    let at = |h: u32, m: u32| Utc.with_ymd_and_hms(2026, 3, 11, h, m, 0).unwrap();
    let store = db.store.clone();
    let s = std::sync::Arc::new(s);
    let book = |store: balcao::store::Store, key: &'static str, from, to| {
        let (s, contact) = (s.clone(), c.contact);
        async move { s.insert_corte(&store, contact, s.ze, (from, to), key, true).await }
    };
    let postgres = store.connection_id().await.unwrap().is_some();
    store
        .unit(async {
            let first = store.connection_id().await.unwrap();
            for _ in 0..5 {
                assert_eq!(store.connection_id().await.unwrap(), first, "one connection for the unit");
            }
            book(store.clone(), "k1", at(17, 0), at(17, 40)).await.unwrap();
            // Refused by the database inside its transaction, after the day's locks were taken.
            let clash = book(store.clone(), "k2", at(17, 20), at(18, 0)).await;
            assert!(matches!(clash, Err(BookingError::SlotTaken)), "{clash:?}");
            // Another task (outside the unit) books the same professional's day: it would wait
            // forever on locks the failed transaction kept if it had not been rolled back.
            let other = tokio::spawn(book(store.clone(), "k3", at(17, 40), at(18, 0)));
            let booked = tokio::time::timeout(Duration::from_secs(20), other).await;
            assert!(matches!(booked, Ok(Ok(Ok(_)))), "the other booking went through: {booked:?}");
            // The unit goes on, on the same connection once its rollback is done.
            let mut same = false;
            for _ in 0..200 {
                if store.connection_id().await.unwrap() == first {
                    same = true;
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            assert!(same, "the unit's connection came back after the rollback");
        })
        .await;
    assert_eq!(db.store.count_active_appointments(s.tenant.id).await.unwrap(), 2);
    if postgres {
        // Two units at once hold two connections.
        let (a, b) = tokio::join!(
            store.unit(async {
                let id = store.connection_id().await.unwrap();
                tokio::time::sleep(Duration::from_millis(50)).await;
                (id, store.connection_id().await.unwrap())
            }),
            store.unit(async {
                let id = store.connection_id().await.unwrap();
                tokio::time::sleep(Duration::from_millis(50)).await;
                (id, store.connection_id().await.unwrap())
            }),
        );
        assert_eq!(a.0, a.1);
        assert_eq!(b.0, b.1);
        assert_ne!(a.0, b.0);
    }
});

contract!(a_statement_beside_an_open_transaction_in_the_same_unit_does_not_wait, |db| async move {
    // The unit's connection is busy with a transaction while a concurrent branch of the same
    // task reads: the read runs on the pool instead of waiting for the connection.
    let s = Scenario::new(db).await;
    let c = s.customer(db, "5511999990001").await;
    let store = db.store.clone();
    let at = |h: u32| Utc.with_ymd_and_hms(2026, 3, 11, h, 0, 0).unwrap();
    store
        .unit(async {
            let reads = async {
                for _ in 0..20 {
                    store.count_active_appointments(s.tenant.id).await.unwrap();
                }
            };
            let (booked, ()) = tokio::time::timeout(Duration::from_secs(20), async {
                tokio::join!(s.insert_corte(&store, c.contact, s.ze, (at(17), at(18)), "k1", true), reads)
            })
            .await
            .expect("nothing waits on the unit");
            booked.unwrap();
        })
        .await;
    assert_eq!(db.store.count_active_appointments(s.tenant.id).await.unwrap(), 1);
});

contract!(a_unit_whose_connection_breaks_takes_a_fresh_one, |db| async move {
    let Some((options, _)) = &db.pg else { return };
    let store = db.store.clone();
    store
        .unit(async {
            let first = store.connection_id().await.unwrap().expect("a PostgreSQL session");
            // Another session ends this one, as a restart or a proxy's idle timeout would.
            let mut admin = <sqlx::PgConnection as sqlx::Connection>::connect_with(options).await.unwrap();
            let _: bool =
                sqlx::query_scalar("SELECT pg_terminate_backend($1)").bind(first).fetch_one(&mut admin).await.unwrap();
            // The statement that meets the broken connection fails; the unit then takes a new one.
            let mut failures = 0;
            let next = loop {
                match store.connection_id().await {
                    Ok(id) => break id.expect("a PostgreSQL session"),
                    Err(_) if failures < 1 => failures += 1,
                    Err(e) => panic!("the unit kept its broken connection: {e}"),
                }
            };
            assert_ne!(next, first);
            assert_eq!(store.connection_id().await.unwrap(), Some(next), "the fresh connection is the unit's");
        })
        .await;
});

contract!(a_transaction_begun_on_a_unit_connection_that_died_idle_runs_on_a_fresh_one, |db| async move {
    let Some((options, _)) = &db.pg else { return };
    let s = Scenario::new(db).await;
    let c = s.customer(db, "5511999990001").await;
    let at = |h: u32| Utc.with_ymd_and_hms(2026, 3, 11, h, 0, 0).unwrap();
    let store = db.store.clone();
    store
        .unit(async {
            let first = store.connection_id().await.unwrap().expect("a PostgreSQL session");
            // Idle across a slow model call, the session is ended (`idle_session_timeout`, a
            // failover): the turn's next write is a transaction, and its BEGIN goes again.
            let mut admin = <sqlx::PgConnection as sqlx::Connection>::connect_with(options).await.unwrap();
            let _: bool =
                sqlx::query_scalar("SELECT pg_terminate_backend($1)").bind(first).fetch_one(&mut admin).await.unwrap();
            s.insert_corte(&store, c.contact, s.ze, (at(14), at(15)), "after-idle", true)
                .await
                .expect("the write after an idle gap");
            assert_ne!(store.connection_id().await.unwrap(), Some(first));
        })
        .await;
    assert_eq!(db.store.count_active_appointments(s.tenant.id).await.unwrap(), 1);
});
