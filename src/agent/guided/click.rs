//! The ids our screens' buttons and rows carry (`g:…`): everything the next step needs, so a
//! click is understood without stored menu state.

use chrono::{DateTime, NaiveDate, Utc};

use super::{CLICK_ID_MAX, ID_INSTANT};
use crate::domain::{MENU_BOOK, MENU_MINE};
use crate::ledger::normalize::parse_instant;

/// A click on one of our screens, as its reply id encodes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Click {
    Menu,
    /// The services list.
    Book {
        page: usize,
    },
    Mine {
        page: usize,
    },
    /// The bookings to move ("remarcar"), paged.
    MoveList {
        page: usize,
    },
    /// The bookings to cancel ("cancelar"), paged.
    CancelList {
        page: usize,
    },
    /// A service chosen: its professionals.
    Service {
        service: i64,
        page: usize,
    },
    /// A professional chosen (0: any): the days.
    Professional {
        service: i64,
        professional: i64,
    },
    /// A day chosen: its times.
    Day {
        service: i64,
        professional: i64,
        date: NaiveDate,
        page: usize,
    },
    /// A time chosen: the confirmation.
    Time {
        service: i64,
        professional: i64,
        at: DateTime<Utc>,
    },
    Confirm {
        service: i64,
        professional: i64,
        at: DateTime<Utc>,
    },
    /// A booking chosen from "Meus horários": move or cancel it.
    Booking {
        booking: i64,
    },
    /// Move a booking: the days its professional has the service free.
    Move {
        booking: i64,
    },
    /// A day chosen for the move: its times.
    MoveDay {
        booking: i64,
        date: NaiveDate,
        page: usize,
    },
    /// A time chosen for the move: the confirmation.
    MoveTime {
        booking: i64,
        at: DateTime<Utc>,
    },
    Cancel {
        booking: i64,
    },
    CancelConfirmed {
        booking: i64,
    },
}

impl Click {
    /// The reply id: short by construction (numbers and dates), so always within Meta's limit.
    pub(super) fn id(&self) -> String {
        // Page 0 keeps the id of the unpaged screen, so ids sent before paging still work.
        let page = |p: &usize| if *p == 0 { String::new() } else { format!(":{p}") };
        match self {
            Self::Menu => "g:menu".to_owned(),
            Self::Book { page: p } => format!("{MENU_BOOK}{}", page(p)),
            Self::Mine { page: p } => format!("{MENU_MINE}{}", page(p)),
            Self::MoveList { page: p } => format!("g:mvlist{}", page(p)),
            Self::CancelList { page: p } => format!("g:cxlist{}", page(p)),
            Self::Service { service, page: p } => format!("g:svc:{service}{}", page(p)),
            Self::Professional { service, professional } => format!("g:pro:{service}:{professional}"),
            Self::Day { service, professional, date, page: p } => {
                format!("g:day:{service}:{professional}:{}{}", date.format("%Y-%m-%d"), page(p))
            }
            Self::Time { service, professional, at } => {
                format!("g:time:{service}:{professional}:{}", at.format(ID_INSTANT))
            }
            Self::Confirm { service, professional, at } => {
                format!("g:ok:{service}:{professional}:{}", at.format(ID_INSTANT))
            }
            Self::Booking { booking } => format!("g:bk:{booking}"),
            Self::Move { booking } => format!("g:mv:{booking}"),
            Self::MoveDay { booking, date, page: p } => {
                format!("g:mvday:{booking}:{}{}", date.format("%Y-%m-%d"), page(p))
            }
            Self::MoveTime { booking, at } => format!("g:mvtime:{booking}:{}", at.format(ID_INSTANT)),
            Self::Cancel { booking } => format!("g:cancel:{booking}"),
            Self::CancelConfirmed { booking } => format!("g:cancelok:{booking}"),
        }
    }

    /// The click a reply id from outside stands for; `None` for anything we did not send.
    pub(super) fn parse(id: &str) -> Option<Self> {
        if id.len() > CLICK_ID_MAX || !id.is_ascii() {
            return None;
        }
        let parts: Vec<&str> = id.split(':').collect();
        let n = |i: usize| parts.get(i).and_then(|p| p.parse::<i64>().ok());
        let page = |i: usize| match parts.get(i) {
            None => Some(0),
            Some(p) => p.parse::<usize>().ok(),
        };
        // An instant holds its own colon (HH:MM): rejoin the tail from `i`.
        let at_from = |i: usize| parse_instant(&parts.get(i..)?.join(":")).ok();
        let at = || at_from(4);
        let date_at = |i: usize| NaiveDate::parse_from_str(parts.get(i)?, "%Y-%m-%d").ok();
        let date = || date_at(4);
        Some(match parts.as_slice() {
            ["g", "menu"] => Self::Menu,
            ["g", "book"] | ["g", "book", _] => Self::Book { page: page(2)? },
            ["g", "mine"] | ["g", "mine", _] => Self::Mine { page: page(2)? },
            ["g", "mvlist"] | ["g", "mvlist", _] => Self::MoveList { page: page(2)? },
            ["g", "cxlist"] | ["g", "cxlist", _] => Self::CancelList { page: page(2)? },
            ["g", "svc", _] | ["g", "svc", _, _] => Self::Service { service: n(2)?, page: page(3)? },
            ["g", "pro", _, _] => Self::Professional { service: n(2)?, professional: n(3)? },
            ["g", "day", _, _, _] | ["g", "day", _, _, _, _] => {
                Self::Day { service: n(2)?, professional: n(3)?, date: date()?, page: page(5)? }
            }
            ["g", "time", _, _, _, _] => Self::Time { service: n(2)?, professional: n(3)?, at: at()? },
            ["g", "ok", _, _, _, _] => Self::Confirm { service: n(2)?, professional: n(3)?, at: at()? },
            ["g", "bk", _] => Self::Booking { booking: n(2)? },
            ["g", "mv", _] => Self::Move { booking: n(2)? },
            ["g", "mvday", _, _] | ["g", "mvday", _, _, _] => {
                Self::MoveDay { booking: n(2)?, date: date_at(3)?, page: page(4)? }
            }
            ["g", "mvtime", _, _, _] => Self::MoveTime { booking: n(2)?, at: at_from(3)? },
            ["g", "cancel", _] => Self::Cancel { booking: n(2)? },
            ["g", "cancelok", _] => Self::CancelConfirmed { booking: n(2)? },
            _ => return None,
        })
    }
}
