//! The guided agent: a deterministic menu with WhatsApp lists and reply buttons, for tenants
//! without a model and as the fallback when the model provider fails.
//!
//! service → professional (or any) → day → time → confirm; "meus horários"; cancel. The
//! confirmations are pending actions (`crate::actions`): choosing a time or a booking to
//! cancel proposes it, and the proposal's own buttons confirm it on the click path. Button and list ids carry everything the next step needs (`g:…`), so a
//! click is understood without stored menu state; a stale or replayed click is answered from
//! the same tools and executor as the model uses, so a replayed "Confirmar" gets
//! `already_done`, never a second booking. Anything not understood brings back the menu.
//!
//! Invariants:
//! - every screen fits WhatsApp's limits by construction: labels and bodies are clipped on
//!   character boundaries, a list longer than ten rows is paged ("Mais horários"), and ids are
//!   built by [`Click::id`] from numbers and dates only;
//! - a reply id from outside is parsed by [`Click::parse`], which rejects anything over
//!   [`CLICK_ID_MAX`] or not in our grammar (then the menu is shown), never panics;
//! - a screen that still fails validation goes out as plain text: building a reply never
//!   fails a turn;
//! - dates shown to customers are `dd/mm`, never ISO.

use std::ops::Range;
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Datelike, NaiveDate, TimeDelta, Utc};
use serde_json::{Value, json};

use crate::jobs::Replier;
use crate::jobs::{Turn, TurnHandler};
use crate::ledger::normalize::{normalize_text, parse_instant};
use crate::ledger::{Executor, Outcome, Tool};
use crate::messages::{GuidedText as T, guided};
use crate::whatsapp::message::{
    BUTTON_ID_MAX, BUTTON_TITLE_MAX, INTERACTIVE_BODY_MAX, LIST_BUTTON_MAX, LIST_ROW_DESCRIPTION_MAX,
    LIST_ROW_TITLE_MAX, LIST_ROWS_MAX, TEXT_BODY_MAX, clip,
};
use crate::whatsapp::{ListRow, ListSection, OutboundMessage, ReplyButton};

/// Days looked at when offering dates: two weeks covers a weekly schedule twice.
const DAYS_AHEAD: i64 = 14;
/// A list holds at most ten rows; a longer one is paged, the tenth row opening the next page.
const PAGE_ROWS: usize = LIST_ROWS_MAX - 1;
/// Meta accepts button ids up to 256 characters; every id we send is far shorter, so a longer
/// one was not ours and is not even split.
const CLICK_ID_MAX: usize = BUTTON_ID_MAX;
/// How instants travel in ids: minutes in UTC, short and unambiguous.
const ID_INSTANT: &str = "%Y-%m-%dT%H:%MZ";

pub struct GuidedTurn {
    pub executor: Executor,
    pub tools: Vec<Arc<dyn Tool>>,
    pub replier: Replier,
}

/// A click on one of our screens, as its reply id encodes it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Click {
    Menu,
    /// The services list.
    Book {
        page: usize,
    },
    Mine {
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
    Cancel {
        booking: i64,
    },
    CancelConfirmed {
        booking: i64,
    },
}

impl Click {
    /// The reply id: short by construction (numbers and dates), so always within Meta's limit.
    fn id(&self) -> String {
        // Page 0 keeps the id of the unpaged screen, so ids sent before paging still work.
        let page = |p: &usize| if *p == 0 { String::new() } else { format!(":{p}") };
        match self {
            Self::Menu => "g:menu".to_owned(),
            Self::Book { page: p } => format!("g:book{}", page(p)),
            Self::Mine { page: p } => format!("g:mine{}", page(p)),
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
            Self::Cancel { booking } => format!("g:cancel:{booking}"),
            Self::CancelConfirmed { booking } => format!("g:cancelok:{booking}"),
        }
    }

    /// The click a reply id from outside stands for; `None` for anything we did not send.
    fn parse(id: &str) -> Option<Self> {
        if id.len() > CLICK_ID_MAX || !id.is_ascii() {
            return None;
        }
        let parts: Vec<&str> = id.split(':').collect();
        let n = |i: usize| parts.get(i).and_then(|p| p.parse::<i64>().ok());
        let page = |i: usize| match parts.get(i) {
            None => Some(0),
            Some(p) => p.parse::<usize>().ok(),
        };
        // An instant holds its own colon (HH:MM): rejoin the tail.
        let at = || parse_instant(&parts.get(4..)?.join(":")).ok();
        let date = || NaiveDate::parse_from_str(parts.get(4)?, "%Y-%m-%d").ok();
        Some(match parts.as_slice() {
            ["g", "menu"] => Self::Menu,
            ["g", "book"] | ["g", "book", _] => Self::Book { page: page(2)? },
            ["g", "mine"] | ["g", "mine", _] => Self::Mine { page: page(2)? },
            ["g", "svc", _] | ["g", "svc", _, _] => Self::Service { service: n(2)?, page: page(3)? },
            ["g", "pro", _, _] => Self::Professional { service: n(2)?, professional: n(3)? },
            ["g", "day", _, _, _] | ["g", "day", _, _, _, _] => {
                Self::Day { service: n(2)?, professional: n(3)?, date: date()?, page: page(5)? }
            }
            ["g", "time", _, _, _, _] => Self::Time { service: n(2)?, professional: n(3)?, at: at()? },
            ["g", "ok", _, _, _, _] => Self::Confirm { service: n(2)?, professional: n(3)?, at: at()? },
            ["g", "cancel", _] => Self::Cancel { booking: n(2)? },
            ["g", "cancelok", _] => Self::CancelConfirmed { booking: n(2)? },
            _ => return None,
        })
    }
}

/// The next screen: a text and, optionally, choices.
struct Screen {
    text: String,
    choices: Choices,
}

impl Screen {
    /// The screen was already queued (a proposal's buttons): nothing more to send.
    fn sent() -> Self {
        Self { text: String::new(), choices: Choices::None }
    }

    fn is_sent(&self) -> bool {
        self.text.is_empty() && matches!(self.choices, Choices::None)
    }
}

enum Choices {
    None,
    Buttons(Vec<ReplyButton>),
    List { button: String, rows: Vec<ListRow> },
}

fn button(click: &Click, title: &str) -> ReplyButton {
    ReplyButton { id: click.id(), title: clip(title, BUTTON_TITLE_MAX) }
}

fn row(click: &Click, title: &str, description: Option<&str>) -> ListRow {
    ListRow {
        id: click.id(),
        title: clip(title, LIST_ROW_TITLE_MAX),
        description: description.map(|d| clip(d, LIST_ROW_DESCRIPTION_MAX)),
    }
}

/// Which of `len` items the `page`-th list shows, and the next page if more remain. A list
/// that fits shows everything; a page past the end (a stale click) shows the first.
fn page_of(len: usize, page: usize) -> (Range<usize>, Option<usize>) {
    if len <= LIST_ROWS_MAX {
        return (0..len, None);
    }
    let pages = len.div_ceil(PAGE_ROWS);
    let page = if page < pages { page } else { 0 };
    let start = page * PAGE_ROWS;
    (start..(start + PAGE_ROWS).min(len), (page + 1 < pages).then_some(page + 1))
}

/// `rows`' `page`-th page, ending with a row for `more(next)` when more remain.
fn paged(
    rows: Vec<ListRow>,
    page: usize,
    more: impl FnOnce(usize) -> anyhow::Result<ListRow>,
) -> anyhow::Result<Vec<ListRow>> {
    let (range, next) = page_of(rows.len(), page);
    let mut shown: Vec<ListRow> = rows.into_iter().skip(range.start).take(range.len()).collect();
    if let Some(next) = next {
        shown.push(more(next)?);
    }
    Ok(shown)
}

/// A moment as customers read it: `dd/mm HH:MM` in the tenant's zone.
fn when(tz: chrono_tz::Tz, at: &str) -> String {
    parse_instant(at).map(|t| when_at(tz, t)).unwrap_or_default()
}

use crate::messages::when_at;

/// A day as customers read it: `dd/mm (weekday)`.
fn day_label(day: NaiveDate) -> anyhow::Result<String> {
    guided(T::Day { date: &day.format("%d/%m").to_string(), weekday: day.weekday().num_days_from_monday() })
}

/// The screen as a WhatsApp message. Labels were clipped when built and bodies are clipped
/// here; a screen that still breaks a rule (a duplicate id, an empty name in the catalog)
/// goes out as its text alone rather than failing the turn.
fn build(screen: Screen) -> OutboundMessage {
    let built = match screen.choices {
        Choices::None => OutboundMessage::text(clip(&screen.text, TEXT_BODY_MAX)),
        Choices::Buttons(buttons) => OutboundMessage::buttons(clip(&screen.text, INTERACTIVE_BODY_MAX), None, buttons),
        Choices::List { button, rows } => OutboundMessage::list(
            clip(&screen.text, INTERACTIVE_BODY_MAX),
            None,
            clip(&button, LIST_BUTTON_MAX),
            vec![ListSection { title: None, rows }],
        ),
    };
    built.unwrap_or_else(|e| {
        tracing::warn!(error = %e, "a guided screen broke WhatsApp's limits; sending its text alone");
        OutboundMessage::Text { body: clip(&screen.text, TEXT_BODY_MAX) }
    })
}

impl GuidedTurn {
    async fn call(&self, turn: &Turn, tool: &str, input: Value) -> anyhow::Result<Outcome> {
        let tool = self
            .tools
            .iter()
            .find(|t| t.spec().name == tool)
            .ok_or_else(|| anyhow::anyhow!("the guided agent needs the {tool} tool"))?;
        self.executor.execute(tool.as_ref(), &turn.call_context(None), &input).await
    }

    async fn value(&self, turn: &Turn, tool: &str, input: Value) -> anyhow::Result<Option<Value>> {
        Ok(match self.call(turn, tool, input).await? {
            Outcome::Executed(v) | Outcome::AlreadyDone(v) => Some(v),
            _ => None,
        })
    }

    async fn menu(&self, turn: &Turn) -> anyhow::Result<Screen> {
        Ok(Screen {
            text: guided(T::Menu { business: &turn.tenant.name, customer: turn.contact.profile_name.as_deref() })?,
            choices: Choices::Buttons(vec![
                button(&Click::Book { page: 0 }, &guided(T::MenuBook)?),
                button(&Click::Mine { page: 0 }, &guided(T::MenuMine)?),
            ]),
        })
    }

    async fn services(&self, turn: &Turn, page: usize) -> anyhow::Result<Screen> {
        let Some(v) = self.value(turn, "list_services", json!({})).await? else { return self.problem(turn).await };
        let rows = v["services"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| {
                let price = s["price"].as_str().map(|p| format!("R$ {}", p.replace('.', ",")));
                Some(row(
                    &Click::Service { service: s["id"].as_i64()?, page: 0 },
                    s["name"].as_str()?,
                    price.as_deref(),
                ))
            })
            .collect();
        let more = guided(T::MoreOptions)?;
        let rows = paged(rows, page, |next| Ok(row(&Click::Book { page: next }, &more, None)))?;
        Ok(Screen {
            text: guided(T::ChooseService)?,
            choices: Choices::List { button: guided(T::ServicesButton)?, rows },
        })
    }

    async fn professionals(&self, turn: &Turn, service: i64, page: usize) -> anyhow::Result<Screen> {
        let Some(v) = self.value(turn, "list_services", json!({})).await? else { return self.problem(turn).await };
        let Some(s) = v["services"].as_array().into_iter().flatten().find(|s| s["id"] == service) else {
            return self.services(turn, 0).await;
        };
        let mut rows = vec![row(&Click::Professional { service, professional: 0 }, &guided(T::AnyProfessional)?, None)];
        rows.extend(s["professionals"].as_array().into_iter().flatten().filter_map(|p| {
            Some(row(&Click::Professional { service, professional: p["id"].as_i64()? }, p["name"].as_str()?, None))
        }));
        let more = guided(T::MoreOptions)?;
        let rows = paged(rows, page, |next| Ok(row(&Click::Service { service, page: next }, &more, None)))?;
        let name = s["name"].as_str().unwrap_or("?");
        Ok(Screen {
            text: guided(T::ChooseProfessional { service: name })?,
            choices: Choices::List { button: guided(T::ProfessionalsButton)?, rows },
        })
    }

    async fn slots(&self, turn: &Turn, service: i64, professional: i64, date: NaiveDate) -> anyhow::Result<Vec<Value>> {
        let mut input = json!({ "service_id": service, "date": date.format("%Y-%m-%d").to_string() });
        if professional != 0 {
            input["professional_id"] = json!(professional);
        }
        Ok(self
            .value(turn, "check_availability", input)
            .await?
            .and_then(|v| v["slots"].as_array().cloned())
            .unwrap_or_default())
    }

    async fn days(&self, turn: &Turn, service: i64, professional: i64) -> anyhow::Result<Screen> {
        let tz = turn.tenant.timezone;
        let today = Utc::now().with_timezone(&tz).date_naive();
        let mut rows = Vec::new();
        for offset in 0..DAYS_AHEAD {
            let date = today + TimeDelta::days(offset);
            if !self.slots(turn, service, professional, date).await?.is_empty() {
                rows.push(row(&Click::Day { service, professional, date, page: 0 }, &day_label(date)?, None));
            }
            if rows.len() == LIST_ROWS_MAX {
                break;
            }
        }
        if rows.is_empty() {
            let mut screen = self.menu(turn).await?;
            screen.text = guided(T::NoDays)?;
            return Ok(screen);
        }
        Ok(Screen { text: guided(T::ChooseDay)?, choices: Choices::List { button: guided(T::DaysButton)?, rows } })
    }

    async fn times(
        &self,
        turn: &Turn,
        service: i64,
        professional: i64,
        date: NaiveDate,
        page: usize,
        text: Option<String>,
    ) -> anyhow::Result<Screen> {
        let tz = turn.tenant.timezone;
        let rows: Vec<ListRow> = self
            .slots(turn, service, professional, date)
            .await?
            .iter()
            .filter_map(|s| {
                let at = parse_instant(s["starts_at"].as_str()?).ok()?;
                let click = Click::Time { service, professional: s["professional_id"].as_i64()?, at };
                let time = at.with_timezone(&tz).format("%H:%M").to_string();
                Some(row(&click, &time, s["professional_name"].as_str()))
            })
            .collect();
        if rows.is_empty() {
            return self.days(turn, service, professional).await;
        }
        let more = guided(T::MoreTimes)?;
        let rows =
            paged(rows, page, |next| Ok(row(&Click::Day { service, professional, date, page: next }, &more, None)))?;
        let text = match text {
            Some(t) => t,
            None => guided(T::ChooseTime { day: &day_label(date)? })?,
        };
        Ok(Screen { text, choices: Choices::List { button: guided(T::TimesButton)?, rows } })
    }

    /// Proposes the booking: its Confirmar/Cancelar buttons are the next screen, sent with the
    /// proposal. A click on them is handled without this menu, so a button tapped again later
    /// (after a cancel, say) finds its action already used and books nothing.
    async fn propose(&self, turn: &Turn, service: i64, professional: i64, at: DateTime<Utc>) -> anyhow::Result<Screen> {
        // The same spelling as the id, so a replayed click is the same call for the ledger.
        let starts_at = at.format(ID_INSTANT).to_string();
        let input = json!({ "service_id": service, "professional_id": professional, "starts_at": starts_at });
        match self.call(turn, "propose_booking", input).await? {
            Outcome::Executed(_) | Outcome::AlreadyDone(_) => Ok(Screen::sent()),
            Outcome::Failed { details, .. }
                if details["reason"] == "slot_taken" || details["reason"] == "not_available" =>
            {
                let date = at.with_timezone(&turn.tenant.timezone).date_naive();
                self.times(turn, service, professional, date, 0, Some(guided(T::SlotTaken)?)).await
            }
            Outcome::Failed { details, .. } if details["reason"] == "customer_busy" => {
                let mut screen = self.mine(turn, 0).await?;
                screen.text = guided(T::AlreadyBooked { when: &when_at(turn.tenant.timezone, at) })?;
                Ok(screen)
            }
            _ => self.problem(turn).await,
        }
    }

    async fn mine(&self, turn: &Turn, page: usize) -> anyhow::Result<Screen> {
        let Some(v) = self.value(turn, "list_my_bookings", json!({})).await? else { return self.problem(turn).await };
        let tz = turn.tenant.timezone;
        let bookings: Vec<&Value> =
            v["bookings"].as_array().into_iter().flatten().filter(|b| b["booking_id"].is_i64()).collect();
        if bookings.is_empty() {
            let mut screen = self.menu(turn).await?;
            screen.text = guided(T::NoBookings)?;
            return Ok(screen);
        }
        let (range, next) = page_of(bookings.len(), page);
        let shown = &bookings[range];
        let lines = shown
            .iter()
            .map(|b| {
                format!(
                    "{} — {} com {}",
                    when(tz, b["starts_at"].as_str().unwrap_or("")),
                    b["service"].as_str().unwrap_or("?"),
                    b["professional"].as_str().unwrap_or("?")
                )
            })
            .collect();
        let mut rows: Vec<ListRow> = shown
            .iter()
            .filter_map(|b| {
                let click = Click::Cancel { booking: b["booking_id"].as_i64()? };
                Some(row(&click, &when(tz, b["starts_at"].as_str().unwrap_or("")), b["service"].as_str()))
            })
            .collect();
        if let Some(next) = next {
            rows.push(row(&Click::Mine { page: next }, &guided(T::MoreOptions)?, None));
        }
        Ok(Screen {
            text: guided(T::Bookings { lines })?,
            choices: Choices::List { button: guided(T::CancelButton)?, rows },
        })
    }

    /// Proposes the cancellation: its buttons are the next screen.
    async fn propose_cancel(&self, turn: &Turn, booking: i64) -> anyhow::Result<Screen> {
        match self.call(turn, "cancel_booking", json!({ "booking_id": booking })).await? {
            Outcome::Executed(_) | Outcome::AlreadyDone(_) => Ok(Screen::sent()),
            _ => self.mine(turn, 0).await,
        }
    }

    async fn problem(&self, turn: &Turn) -> anyhow::Result<Screen> {
        let mut screen = self.menu(turn).await?;
        screen.text = guided(T::Problem)?;
        Ok(screen)
    }

    /// Decides the next screen from the turn's last message.
    async fn screen(&self, turn: &Turn) -> anyhow::Result<Screen> {
        let Some(last) = turn.messages.last() else { return self.menu(turn).await };
        let click = last.reply_id.as_deref().and_then(Click::parse);
        match click {
            Some(Click::Menu) => self.menu(turn).await,
            Some(Click::Book { page }) => self.services(turn, page).await,
            Some(Click::Mine { page }) => self.mine(turn, page).await,
            Some(Click::Service { service, page }) => self.professionals(turn, service, page).await,
            Some(Click::Professional { service, professional }) => self.days(turn, service, professional).await,
            Some(Click::Day { service, professional, date, page }) => {
                self.times(turn, service, professional, date, page, None).await
            }
            // `g:ok` and `g:cancelok` were confirmations before pending actions; a tap on one
            // found in an old chat now only proposes again.
            Some(Click::Time { service, professional, at } | Click::Confirm { service, professional, at }) => {
                self.propose(turn, service, professional, at).await
            }
            Some(Click::Cancel { booking } | Click::CancelConfirmed { booking }) => {
                self.propose_cancel(turn, booking).await
            }
            None => {
                let text = normalize_text(last.body.as_deref().unwrap_or(""));
                if text.contains("meus horarios") || text.contains("meus horários") {
                    self.mine(turn, 0).await
                } else {
                    self.menu(turn).await
                }
            }
        }
    }
}

#[async_trait]
impl TurnHandler for GuidedTurn {
    async fn handle(&self, turn: &Turn) -> anyhow::Result<()> {
        let screen = self.screen(turn).await?;
        if !screen.is_sent() {
            self.replier.reply(turn, 0, build(screen));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;
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
            Click::Service { service: big, page: 0 },
            Click::Service { service: 7, page: 2 },
            Click::Professional { service: big, professional: big },
            Click::Day { service: big, professional: big, date, page: 0 },
            Click::Day { service: big, professional: big, date, page: usize::MAX },
            Click::Time { service: big, professional: big, at: at() },
            Click::Confirm { service: big, professional: 0, at: at() },
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
        let list = build(Screen { text: name.repeat(40), choices: Choices::List { button: name.into(), rows } });
        assert!(matches!(list, OutboundMessage::List { .. }), "{list:?}");
        assert!(list.validate().is_ok());

        let buttons = vec![button(&Click::Menu, name), button(&Click::Menu, "Outro")];
        let duplicate = build(Screen { text: "Escolha".into(), choices: Choices::Buttons(buttons) });
        assert_eq!(duplicate, OutboundMessage::Text { body: "Escolha".into() });
    }

    #[test]
    fn days_are_shown_day_first() {
        let day = NaiveDate::from_ymd_opt(2026, 3, 11).expect("a valid date");
        assert_eq!(day_label(day).expect("template"), "11/03 (qua)");
        assert_eq!(when_at(chrono_tz::America::Sao_Paulo, at()), "11/03 14:30");
    }
}
