use chrono::TimeZone;

use super::*;
use crate::whatsapp::OutboundMessage;
use crate::whatsapp::message::LIST_ROW_ID_MAX;

fn at() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 3, 11, 17, 30, 0).single().expect("a valid instant")
}

#[test]
fn every_click_id_parses_back_and_fits_a_row_id() {
    let date = NaiveDate::from_ymd_opt(2026, 3, 11).expect("a valid date");
    let big = i64::MAX;
    for click in [
        Click::Menu,
        Click::Book { page: 0 },
        Click::Book { page: 3 },
        Click::Mine { page: 1 },
        Click::MoveList { page: 0 },
        Click::MoveList { page: 2 },
        Click::CancelList { page: 3 },
        Click::Service { service: big, page: 0 },
        Click::Service { service: 7, page: 2 },
        Click::Professional { service: big, professional: big },
        Click::Day { service: big, professional: big, date, page: 0 },
        Click::Day { service: big, professional: big, date, page: usize::MAX },
        Click::Time { service: big, professional: big, at: at() },
        Click::Confirm { service: big, professional: 0, at: at() },
        Click::Booking { booking: big },
        Click::Move { booking: big },
        Click::MoveDay { booking: big, date, page: 0 },
        Click::MoveDay { booking: big, date, page: usize::MAX },
        Click::MoveTime { booking: big, at: at() },
        Click::Cancel { booking: big },
        Click::CancelConfirmed { booking: big },
    ] {
        let id = click.id();
        assert!(id.chars().count() <= LIST_ROW_ID_MAX, "{id}");
        assert_eq!(Click::parse(&id), Some(click), "{id}");
    }
    // Ids sent before paging existed still mean the same.
    assert_eq!(Click::parse("g:book"), Some(Click::Book { page: 0 }));
    assert_eq!(
        Click::parse("g:ok:1:2:2026-03-11T17:30Z"),
        Some(Click::Confirm { service: 1, professional: 2, at: at() })
    );
}

#[test]
fn crafted_click_ids_are_unknown() {
    let huge = format!("g:time:1:2:{}", "9".repeat(10 * 1024));
    for id in [
        huge.as_str(),
        &"g:".repeat(5 * 1024),
        "",
        "g",
        "g:ok:x:y:z",
        "g:ok:1:2:tomorrow",
        "g:time:1:2:2026-03-11T17:30Z:extra",
        "g:day:1:2:2026-13-45",
        "g:day:1:2:2026-03-11:-1",
        "g:svc:1:99999999999999999999999999",
        "g:cancel:1:2",
        "g:mvtime:1:2026-03-11T17:30Z:extra",
        "g:mvday:1:2026-03-11:x",
        "g:mv:1:2",
        "g:book:x",
        "g:time:1:2:2026-03-11T17:30:00+03:00",
        "g:svc:ç",
    ] {
        assert_eq!(Click::parse(id), None, "{id:?}");
    }
}

#[test]
fn pages_cover_every_item_once() {
    for len in [0, 1, 9, 10, 11, 18, 19, 30, 40] {
        let mut seen = Vec::new();
        let mut page = Some(0);
        while let Some(p) = page {
            let (range, next) = page_of(len, p);
            assert!(range.len() + usize::from(next.is_some()) <= LIST_ROWS_MAX, "len {len} page {p}");
            seen.extend(range);
            page = next;
        }
        assert_eq!(seen, (0..len).collect::<Vec<_>>(), "len {len}");
    }
    // A page past the end (a stale click) shows the first.
    assert_eq!(page_of(30, 99), (0..PAGE_ROWS, Some(1)));
}

#[test]
fn long_labels_are_clipped_and_a_broken_screen_falls_back_to_text() {
    let name = "Corte masculino com barba completa, sobrancelha, hidratação e massagem relaxante";
    let rows = vec![row(&Click::Book { page: 0 }, name, Some(&name.repeat(3)))];
    let list = build(Screen::new(name.repeat(40), Choices::List { button: name.into(), rows }));
    assert!(matches!(list, OutboundMessage::List { .. }), "{list:?}");
    assert!(list.validate().is_ok());

    let buttons = vec![button(&Click::Menu, name), button(&Click::Menu, "Outro")];
    let duplicate = build(Screen::new("Escolha".into(), Choices::Buttons(buttons)));
    assert_eq!(duplicate, OutboundMessage::Text { body: "Escolha".into() });
}

#[test]
fn days_are_shown_day_first() {
    let day = NaiveDate::from_ymd_opt(2026, 3, 11).expect("a valid date");
    assert_eq!(day_label(day).expect("template"), "11/03 (qua)");
    assert_eq!(when_at(chrono_tz::America::Sao_Paulo, at()), "11/03 14:30");
}
