//! Booking tools through the executor, on both databases: catalog, availability in several
//! time zones, the booking lifecycle, and the overlap rule held by the database.

use std::sync::Arc;

use balcao::domain::{Cents, LedgerKey};
use balcao::ledger::Outcome;
use balcao::store::{BookingStore, CatalogStore, LedgerStore, Move, TenantStore};
use balcao::tenant::TenantSpec;
use chrono::{TimeZone, Utc};
use serde_json::{Value, json};

use crate::contract;
use crate::support::scenario::{Scenario, catalog_file, executed, now};

fn starts(v: &Value) -> Vec<String> {
    v["slots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| format!("{}@{}", s["professional_name"].as_str().unwrap(), s["starts_at"].as_str().unwrap()))
        .collect()
}

contract!(services_and_availability, |db| async move {
    let s = Scenario::new(db).await;
    let c = s.customer(db, "5511999990001").await;
    let services = executed(s.call(&c, "list_services", json!({})).await);
    assert_eq!(services["services"][0]["name"], "Corte masculino");
    assert_eq!(services["services"][0]["price"], "50.00");
    assert_eq!(services["services"][0]["duration_minutes"], 30);
    assert_eq!(services["services"][0]["professionals"].as_array().unwrap().len(), 2);
    assert_eq!(services["services"][1]["price"], "35.00");
    assert_eq!(executed(s.call(&c, "list_services", Value::Null).await), services);

    let day = executed(s.call(&c, "check_availability", json!({ "service_id": s.corte, "date": "2026-03-11" })).await);
    assert_eq!(day["timezone"], "America/Sao_Paulo");
    let all = starts(&day);
    assert_eq!(
        all[..4],
        [
            "Zé@2026-03-11T09:00:00-03:00",
            "Zé@2026-03-11T09:30:00-03:00",
            "Zé@2026-03-11T10:00:00-03:00",
            "Rafa@2026-03-11T10:00:00-03:00"
        ]
    );
    assert!(!all.iter().any(|s| s.starts_with("Zé@") && s.contains("T12:")), "Zé's lunch break is not offered");
    let rafa = executed(
        s.call(
            &c,
            "check_availability",
            json!({ "service_id": s.corte, "date": "2026-03-11", "professional_id": s.rafa }),
        )
        .await,
    );
    assert!(starts(&rafa).iter().all(|s| s.starts_with("Rafa@")));
    // Rafa does not do beards; unknown ids are errors the model can read.
    let refused = s
        .call(
            &c,
            "check_availability",
            json!({ "service_id": s.barba, "date": "2026-03-11", "professional_id": s.rafa }),
        )
        .await;
    assert!(refused.is_error(), "{refused:?}");
    assert!(s.call(&c, "check_availability", json!({ "service_id": 999, "date": "2026-03-11" })).await.is_error());
    // Today, 09:00 in São Paulo with an hour's notice: 10:00 is the first offer.
    let today =
        executed(s.call(&c, "check_availability", json!({ "service_id": s.corte, "date": "2026-03-10" })).await);
    assert_eq!(starts(&today)[0], "Zé@2026-03-10T10:00:00-03:00");
});

contract!(availability_follows_the_tenant_time_zone, |db| async move {
    for (zone, date, first) in [
        ("America/Manaus", "2026-03-11", "Zé@2026-03-11T09:00:00-04:00"),
        ("America/Noronha", "2026-03-11", "Zé@2026-03-11T09:00:00-02:00"),
        // New York moved to daylight time on 2026-03-08.
        ("America/New_York", "2026-03-09", "Zé@2026-03-09T09:00:00-04:00"),
        ("America/New_York", "2026-03-06", "Zé@2026-03-06T09:00:00-05:00"),
    ] {
        let spec = TenantSpec::parse(&catalog_file("tz", "777", zone)).unwrap();
        let id = db.store.apply_tenant(&spec, Utc::now()).await.unwrap().id();
        db.store.apply_catalog(id, &spec.catalog).await.unwrap();
        let s = Scenario { tenant: db.store.tenant(id).await.unwrap().unwrap(), ..Scenario::in_zone(db, zone).await };
        let c = s.customer(db, "5511999990001").await;
        let early = Utc.with_ymd_and_hms(2026, 3, 1, 0, 0, 0).unwrap();
        let (services, _) = db.store.catalog(id).await.unwrap();
        let corte = services.iter().find(|x| x.name == "Corte masculino").unwrap().id;
        let day =
            executed(s.call_at(&c, "check_availability", json!({ "service_id": corte, "date": date }), early).await);
        assert_eq!(starts(&day)[0], first, "{zone}");
    }
});

contract!(book_list_reschedule_cancel, |db| async move {
    let s = Scenario::new(db).await;
    let c = s.customer(db, "5511999990001").await;
    let booked = executed(
        s.call(
            &c,
            "create_booking",
            json!({ "service_id": s.corte, "professional_id": s.ze, "starts_at": "2026-03-11T14:00:00-03:00" }),
        )
        .await,
    );
    assert_eq!(
        (booked["starts_at"].clone(), booked["ends_at"].clone(), booked["status"].clone(), booked["price"].clone()),
        (json!("2026-03-11T14:00:00-03:00"), json!("2026-03-11T14:40:00-03:00"), json!("confirmed"), json!("50.00"))
    );
    let id = booked["booking_id"].as_i64().unwrap();
    let mine = executed(s.call(&c, "list_my_bookings", json!({})).await);
    assert_eq!(mine["bookings"][0]["booking_id"], id);
    // The slot (and its buffer) is gone from availability.
    let day = starts(&executed(
        s.call(
            &c,
            "check_availability",
            json!({ "service_id": s.corte, "date": "2026-03-11", "professional_id": s.ze }),
        )
        .await,
    ));
    assert!(
        !day.iter().any(|x| x.contains("T14:00") || x.contains("T14:30")) && day.iter().any(|x| x.contains("T15:00")),
        "{day:?}"
    );

    // Moving it into its own old block is fine: only other bookings conflict.
    let moved = executed(
        s.call(&c, "reschedule_booking", json!({ "booking_id": id, "starts_at": "2026-03-11T14:30:00-03:00" })).await,
    );
    assert_eq!(moved["starts_at"], "2026-03-11T14:30:00-03:00");
    assert!(matches!(
        s.call(&c, "reschedule_booking", json!({ "booking_id": id, "starts_at": "2026-03-11 17:30Z" })).await,
        Outcome::AlreadyDone(_)
    ));
    let outside =
        s.call(&c, "reschedule_booking", json!({ "booking_id": id, "starts_at": "2026-03-11T12:00:00-03:00" })).await;
    assert!(matches!(&outside, Outcome::Failed { details, .. } if details["reason"] == "not_available"), "{outside:?}");

    // Someone else's booking is not theirs to touch.
    let stranger = s.customer(db, "5511999990002").await;
    assert!(s.call(&stranger, "cancel_booking", json!({ "booking_id": id })).await.is_error());

    let cancelled = s.cancel(&c, &json!(id)).await;
    assert_eq!(cancelled["result"]["status"], "cancelled", "{cancelled}");
    // Cancelled, it is no longer one of the customer's bookings to propose cancelling.
    assert!(s.call(&c, "cancel_booking", json!({ "booking_id": id })).await.is_error());
    assert_eq!(executed(s.call(&c, "list_my_bookings", json!({})).await)["bookings"], json!([]));
    assert_eq!(db.store.count_active_appointments(s.tenant.id).await.unwrap(), 0);
});

contract!(undone_effects_run_again_instead_of_replaying, |db| async move {
    let s = Scenario::new(db).await;
    let c = s.customer(db, "5511999990001").await;
    let book = json!({ "service_id": s.corte, "professional_id": s.ze, "starts_at": "2026-03-11T14:00:00-03:00" });
    let first = executed(s.call(&c, "create_booking", book.clone()).await);
    assert_eq!(s.cancel(&c, &first["booking_id"]).await["status"], "executed");
    // Booking the same slot again after cancelling is a new booking, not "already done".
    let again = executed(s.call(&c, "create_booking", book.clone()).await);
    assert_ne!(again["booking_id"], first["booking_id"]);
    assert_eq!(db.store.count_active_appointments(s.tenant.id).await.unwrap(), 1);
    assert!(matches!(s.call(&c, "create_booking", book).await, Outcome::AlreadyDone(_)));

    // Moving there and back and there again ends where it was asked to.
    let id = again["booking_id"].clone();
    for at in ["2026-03-11T15:00:00-03:00", "2026-03-11T14:00:00-03:00", "2026-03-11T15:00:00-03:00"] {
        let moved = executed(s.call(&c, "reschedule_booking", json!({ "booking_id": id, "starts_at": at })).await);
        assert_eq!(moved["starts_at"], at);
    }
    let mine = executed(s.call(&c, "list_my_bookings", json!({})).await);
    assert_eq!(mine["bookings"][0]["starts_at"], "2026-03-11T15:00:00-03:00");

    // A corrected request after a refusal runs; it is not a conflict.
    let wrong = s
        .call(
            &c,
            "create_booking",
            json!({ "service_id": 999, "professional_id": s.rafa, "starts_at": "2026-03-11T10:00:00-03:00" }),
        )
        .await;
    assert!(matches!(wrong, Outcome::Failed { .. }), "{wrong:?}");
    let fixed = s
        .call(
            &c,
            "create_booking",
            json!({ "service_id": s.corte, "professional_id": s.rafa, "starts_at": "2026-03-11T10:00:00-03:00" }),
        )
        .await;
    assert!(matches!(fixed, Outcome::Executed(_)), "{fixed:?}");

    // A booking in the past cannot be cancelled.
    let late = s.call_at(&c, "cancel_booking", json!({ "booking_id": id }), now() + chrono::TimeDelta::days(2)).await;
    assert!(late.is_error(), "{late:?}");
});

contract!(a_taken_or_unoffered_time_is_explained_with_alternatives, |db| async move {
    let s = Scenario::new(db).await;
    let a = s.customer(db, "5511999990001").await;
    let b = s.customer(db, "5511999990002").await;
    executed(
        s.call(
            &a,
            "create_booking",
            json!({ "service_id": s.corte, "professional_id": s.ze, "starts_at": "2026-03-11T14:00:00-03:00" }),
        )
        .await,
    );
    // 14:30 overlaps 14:00 + 30 min + 10 min buffer.
    let taken = s
        .call(
            &b,
            "create_booking",
            json!({ "service_id": s.corte, "professional_id": s.ze, "starts_at": "2026-03-11T14:30:00-03:00" }),
        )
        .await;
    let Outcome::Failed { error, details } = &taken else { panic!("{taken:?}") };
    assert!(error.starts_with("slot_taken"), "{error}");
    let alternatives: Vec<&str> =
        details["alternatives"].as_array().unwrap().iter().map(|x| x["starts_at"].as_str().unwrap()).collect();
    assert!(
        alternatives.contains(&"2026-03-11T15:00:00-03:00") && !alternatives.contains(&"2026-03-11T14:30:00-03:00")
    );
    // Too soon (notice) and in the lunch break are not offered at all.
    for at in ["2026-03-10T09:30:00-03:00", "2026-03-11T12:30:00-03:00", "2026-05-11T14:00:00-03:00"] {
        let refused = s
            .call(&b, "create_booking", json!({ "service_id": s.corte, "professional_id": s.ze, "starts_at": at }))
            .await;
        assert!(
            matches!(&refused, Outcome::Failed { details, .. } if details["reason"] == "not_available"),
            "{at}: {refused:?}"
        );
    }
    // Same customer, same professional and time, another service: a conflict, not a second booking.
    let conflict = s
        .call(
            &a,
            "create_booking",
            json!({ "service_id": s.barba, "professional_id": s.ze, "starts_at": "2026-03-11T14:00:00-03:00" }),
        )
        .await;
    assert!(matches!(&conflict, Outcome::Conflict { hint, .. } if hint.contains("reschedule_booking")), "{conflict:?}");
    assert_eq!(db.store.count_active_appointments(s.tenant.id).await.unwrap(), 1);
});

contract!(fifty_concurrent_overlapping_bookings_make_one_appointment, |db| async move {
    let s = Arc::new(Scenario::new(db).await);
    let mut customers = Vec::new();
    for i in 0..50 {
        customers.push(Arc::new(s.customer(db, &format!("55119{i:08}")).await));
    }
    let mut tasks = tokio::task::JoinSet::new();
    for (i, c) in customers.into_iter().enumerate() {
        let s = s.clone();
        let at = if i % 2 == 0 { "2026-03-11T14:00:00-03:00" } else { "2026-03-11T14:30:00-03:00" };
        tasks.spawn(async move {
            s.call(&c, "create_booking", json!({ "service_id": s.corte, "professional_id": s.ze, "starts_at": at }))
                .await
        });
    }
    let (mut booked, mut taken) = (0, 0);
    while let Some(outcome) = tasks.join_next().await {
        match outcome.unwrap() {
            Outcome::Executed(_) => booked += 1,
            Outcome::Failed { error, .. } if error.starts_with("slot_taken") => taken += 1,
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!((booked, taken), (1, 49));
    assert_eq!(db.store.count_active_appointments(s.tenant.id).await.unwrap(), 1);
});

contract!(the_database_refuses_overlaps_whoever_writes, |db| async move {
    let s = Scenario::new(db).await;
    let c = s.customer(db, "5511999990001").await;
    let at = |h: u32, m: u32| Utc.with_ymd_and_hms(2026, 3, 11, h, m, 0).unwrap();
    let insert = |key: &'static str, from, to, pro| s.insert_corte(&db.store, c.contact, pro, (from, to), key, true);
    let first = insert("k1", at(17, 0), at(17, 40), s.ze).await.unwrap();
    assert!(matches!(insert("k2", at(17, 39), at(18, 0), s.ze).await, Err(balcao::store::BookingError::SlotTaken)));
    // Back to back is fine; another professional is fine; the same key returns the same row.
    let k3 = insert("k3", at(17, 40), at(18, 0), s.ze).await.unwrap();
    let k4 = insert("k4", at(17, 0), at(17, 40), s.rafa).await.unwrap();
    assert_eq!(insert("k1", at(17, 0), at(17, 40), s.ze).await.unwrap(), first);
    // A cancelled appointment frees its time; moving onto an occupied one is refused.
    db.store.cancel_appointment(s.tenant.id, c.contact, first.id, None, now()).await.unwrap();
    let fresh = insert("k5", at(17, 0), at(17, 40), s.ze).await.unwrap();
    let k6 = LedgerKey::from_stored("k6".into());
    let to = Move {
        tenant: s.tenant.id,
        contact: c.contact,
        id: fresh.id,
        professional_id: s.ze,
        starts_at: at(17, 30),
        ends_at: at(18, 10),
        key: &k6,
    };
    let clash = db.store.move_appointment(&to, None, now()).await;
    // The blocks it would meet are this customer's own (k4 with Rafa, k3 with Zé): that is said
    // first. Another customer's is the database's refusal.
    assert!(matches!(&clash, Err(balcao::store::BookingError::CustomerOverlap(own)) if own.id == k4.id), "{clash:?}");
    for own in [k3.id, k4.id] {
        db.store.cancel_appointment(s.tenant.id, c.contact, own, None, now()).await.unwrap();
    }
    let other = s.customer(db, "5511999990002").await;
    s.insert_corte(&db.store, other.contact, s.ze, (at(17, 40), at(18, 0)), "k7", false).await.unwrap();
    let clash = db.store.move_appointment(&to, None, now()).await;
    assert!(matches!(clash, Err(balcao::store::BookingError::SlotTaken)), "{clash:?}");
    assert_eq!(db.store.count_active_appointments(s.tenant.id).await.unwrap(), 2);
});

contract!(applying_the_catalog_twice_changes_nothing, |db| async move {
    let text = catalog_file("catalogo", "888", "America/Sao_Paulo");
    let spec = TenantSpec::parse(&text).unwrap();
    let id = db.store.apply_tenant(&spec, Utc::now()).await.unwrap().id();
    assert!(db.store.apply_catalog(id, &spec.catalog).await.unwrap());
    let (services, professionals) = db.store.catalog(id).await.unwrap();
    assert!(!db.store.apply_catalog(id, &spec.catalog).await.unwrap());
    assert_eq!(db.store.catalog(id).await.unwrap(), (services.clone(), professionals.clone()));

    let cheaper_text = text.replace("\"50.00\"", "\"45.00\"");
    let cheaper = TenantSpec::parse(&cheaper_text).unwrap();
    assert!(db.store.apply_catalog(id, &cheaper.catalog).await.unwrap());
    let without_beard = TenantSpec::parse(
        &cheaper_text
            .replace("[[services]]\nname = \"Barba\"\nduration_minutes = 20\nprice = \"35,00\"\n", "")
            .replace(", \"Barba\"", ""),
    )
    .unwrap();
    assert!(db.store.apply_catalog(id, &without_beard.catalog).await.unwrap());
    let (now_services, now_professionals) = db.store.catalog(id).await.unwrap();
    assert_eq!(now_services.len(), 1);
    assert_eq!(now_services[0].id, services[0].id, "ids stay stable");
    assert_eq!(now_services[0].price, Cents(4500));
    assert_eq!(now_professionals[0].service_ids, vec![services[0].id]);
    let tenant = db.store.tenant(id).await.unwrap().unwrap();
    assert_eq!((tenant.booking.min_notice_minutes, tenant.booking.slot_step_minutes), (60, 30));
});

contract!(a_booking_commits_once_and_racing_repeats_replay_it, |db| async move {
    let s = Arc::new(Scenario::new(db).await);
    let c = Arc::new(s.customer(db, "5511999990009").await);
    let input = json!({ "service_id": s.corte, "professional_id": s.ze, "starts_at": "2026-03-11T14:00:00-03:00" });
    // Alone: the ledger row is claimed, the appointment written and the outcome stored in one
    // commit (counted on SQLite; PostgreSQL's statistics count it in the turns bench).
    let before = db.store.sqlite_commits();
    let booked = executed(s.call(&c, "create_booking", input.clone()).await);
    if let (Some(before), Some(after)) = (before, db.store.sqlite_commits()) {
        assert_eq!(after - before, 1, "a booking should commit once");
    }
    let replayed = s.call(&c, "create_booking", input).await;
    assert!(matches!(&replayed, Outcome::AlreadyDone(v) if v["booking_id"] == booked["booking_id"]), "{replayed:?}");

    // Twenty identical calls at once on a fresh slot: one books, every other one is answered
    // from its ledger row (its claim found the key taken, or its probe found the row).
    let input = json!({ "service_id": s.corte, "professional_id": s.ze, "starts_at": "2026-03-11T16:00:00-03:00" });
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..20 {
        let (s, c, input) = (s.clone(), c.clone(), input.clone());
        tasks.spawn(async move { s.call(&c, "create_booking", input).await });
    }
    let (mut booked, mut replayed) = (Vec::new(), Vec::new());
    while let Some(outcome) = tasks.join_next().await {
        match outcome.unwrap() {
            Outcome::Executed(v) => booked.push(v["booking_id"].clone()),
            Outcome::AlreadyDone(v) => replayed.push(v["booking_id"].clone()),
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!((booked.len(), replayed.len()), (1, 19));
    assert!(replayed.iter().all(|id| *id == booked[0]), "{replayed:?}");
    assert_eq!(db.store.count_active_appointments(s.tenant.id).await.unwrap(), 2);
    let rows = db.store.executions_of_conversation(s.tenant.id, c.conversation).await.unwrap();
    let rows: Vec<_> = rows.iter().map(|r| (r.status.as_str(), r.generation, r.replay_count)).collect();
    assert_eq!(rows, [("succeeded", 1, 1), ("succeeded", 1, 19)]);
});

contract!(a_move_to_where_a_booking_already_is_does_not_replay_after_it_moved, |db| async move {
    let s = Scenario::new(db).await;
    let c = s.customer(db, "5511999990010").await;
    let at = |t: &str| format!("2026-03-11T{t}:00-03:00");
    let booked = executed(
        s.call(
            &c,
            "create_booking",
            json!({ "service_id": s.corte, "professional_id": s.ze, "starts_at": at("14:00") }),
        )
        .await,
    );
    let id = booked["booking_id"].clone();
    let reschedule = |t: &str| json!({ "booking_id": id, "starts_at": at(t) });
    // Asked to move where it already is: nothing moves, and the answer is about this booking.
    assert_eq!(executed(s.call(&c, "reschedule_booking", reschedule("14:00")).await)["starts_at"], at("14:00"));
    assert_eq!(executed(s.call(&c, "reschedule_booking", reschedule("15:00")).await)["starts_at"], at("15:00"));
    // Asked again for 14:00, it moves back: the earlier answer no longer describes the booking.
    let back = s.call(&c, "reschedule_booking", reschedule("14:00")).await;
    assert!(matches!(&back, Outcome::Executed(v) if v["starts_at"] == at("14:00")), "{back:?}");
    let mine = executed(s.call(&c, "list_my_bookings", json!({})).await);
    assert_eq!(mine["bookings"][0]["starts_at"], at("14:00"));
});

contract!(a_customer_is_never_in_two_places_whoever_books_or_moves, |db| async move {
    let s = Arc::new(Scenario::new(db).await);
    let c = Arc::new(s.customer(db, "5511999990001").await);
    let book = |pro: i64, at: &'static str| {
        let (s, c) = (s.clone(), c.clone());
        async move {
            s.call(&c, "create_booking", json!({ "service_id": s.corte, "professional_id": pro, "starts_at": at }))
                .await
        }
    };
    // The same customer at 14:00 with both professionals, racing: one booking, whatever the
    // backend (on PostgreSQL the customer's lock makes the overlap check hold).
    let racers: Vec<_> = (0..8)
        .map(|i| tokio::spawn(book(if i % 2 == 0 { s.ze } else { s.rafa }, "2026-03-11T14:00:00-03:00")))
        .collect();
    for racer in racers {
        match racer.await.unwrap() {
            Outcome::Executed(_) | Outcome::AlreadyDone(_) | Outcome::AlreadyInProgress => {}
            Outcome::Failed { details, .. } if details["reason"] == "customer_busy" => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(db.store.count_active_appointments(s.tenant.id).await.unwrap(), 1);

    // A second booking later that day cannot be moved onto the first, by the model's tool.
    let later = executed(book(s.rafa, "2026-03-11T15:30:00-03:00").await);
    let id = later["booking_id"].as_i64().unwrap();
    let onto =
        s.call(&c, "reschedule_booking", json!({ "booking_id": id, "starts_at": "2026-03-11T14:00:00-03:00" })).await;
    assert!(matches!(&onto, Outcome::Failed { details, .. } if details["reason"] == "customer_busy"), "{onto:?}");
    let mine = executed(s.call(&c, "list_my_bookings", json!({})).await);
    let at: Vec<&str> = mine["bookings"].as_array().unwrap().iter().filter_map(|b| b["starts_at"].as_str()).collect();
    assert_eq!(at, ["2026-03-11T14:00:00-03:00", "2026-03-11T15:30:00-03:00"]);
});
