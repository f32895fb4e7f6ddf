//! A screen: its text and choices, paged and clipped to WhatsApp's limits, and the message it
//! becomes.

use std::ops::Range;

use chrono::{Datelike, NaiveDate};

use super::{Click, PAGE_ROWS};
use crate::ledger::normalize::parse_instant;
use crate::messages::{GuidedText as T, guided, when_at};
use crate::whatsapp::message::{
    BUTTON_TITLE_MAX, INTERACTIVE_BODY_MAX, LIST_BUTTON_MAX, LIST_ROW_DESCRIPTION_MAX, LIST_ROW_TITLE_MAX,
    LIST_ROWS_MAX, TEXT_BODY_MAX, clip,
};
use crate::whatsapp::{ListRow, ListSection, OutboundMessage, ReplyButton};

/// The next screen: a text and, optionally, choices, after a message sent before it (the
/// business's location pin).
pub(super) struct Screen {
    pub(super) text: String,
    pub(super) choices: Choices,
    pub(super) lead: Option<OutboundMessage>,
}

impl Screen {
    pub(super) fn new(text: String, choices: Choices) -> Self {
        Self { text, choices, lead: None }
    }

    /// The screen was already queued (a proposal's buttons): nothing more to send.
    pub(super) fn sent() -> Self {
        Self::new(String::new(), Choices::None)
    }

    pub(super) fn is_sent(&self) -> bool {
        self.text.is_empty() && matches!(self.choices, Choices::None) && self.lead.is_none()
    }
}

pub(super) enum Choices {
    None,
    Buttons(Vec<ReplyButton>),
    List { button: String, rows: Vec<ListRow> },
}

pub(super) fn button(click: &Click, title: &str) -> ReplyButton {
    ReplyButton { id: click.id(), title: clip(title, BUTTON_TITLE_MAX) }
}

pub(super) fn row(click: &Click, title: &str, description: Option<&str>) -> ListRow {
    ListRow {
        id: click.id(),
        title: clip(title, LIST_ROW_TITLE_MAX),
        description: description.map(|d| clip(d, LIST_ROW_DESCRIPTION_MAX)),
    }
}

/// Which of `len` items the `page`-th list shows, and the next page if more remain. A list
/// that fits shows everything; a page past the end (a stale click) shows the first.
pub(super) fn page_of(len: usize, page: usize) -> (Range<usize>, Option<usize>) {
    if len <= LIST_ROWS_MAX {
        return (0..len, None);
    }
    let pages = len.div_ceil(PAGE_ROWS);
    let page = if page < pages { page } else { 0 };
    let start = page * PAGE_ROWS;
    (start..(start + PAGE_ROWS).min(len), (page + 1 < pages).then_some(page + 1))
}

/// `rows`' `page`-th page, ending with a row for `more(next)` when more remain.
pub(super) fn paged(
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
pub(super) fn when(tz: chrono_tz::Tz, at: &str) -> String {
    parse_instant(at).map(|t| when_at(tz, t)).unwrap_or_default()
}

/// A day as customers read it: `dd/mm (weekday)`.
pub(super) fn day_label(day: NaiveDate) -> anyhow::Result<String> {
    guided(T::Day { date: &day.format("%d/%m").to_string(), weekday: day.weekday().num_days_from_monday() })
}

/// The screen as a WhatsApp message. Labels were clipped when built and bodies are clipped
/// here; a screen that still breaks a rule (a duplicate id, an empty name in the catalog)
/// goes out as its text alone rather than failing the turn.
pub(super) fn build(screen: Screen) -> OutboundMessage {
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
