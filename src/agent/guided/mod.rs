//! The guided agent: a deterministic menu with WhatsApp lists and reply buttons, for tenants
//! without a model and as the fallback when the model provider fails.
//!
//! service → professional (or any) → day → time → confirm; "meus horários" → a booking → move
//! (day → time → confirm) or cancel ([`mine`]); "endereço" sends the business's location pin
//! before the text ([`address`]). The confirmations are pending actions (`crate::actions`):
//! choosing a time, a new time or a booking to cancel proposes it, and the proposal's own
//! buttons confirm it on the click path. Button and list ids carry everything the next step needs (`g:…`), so a
//! click is understood without stored menu state; a stale or replayed click is answered from
//! the same tools and executor as the model uses, so a replayed "Confirmar" gets
//! `already_done`, never a second booking. Free text reaches its screen by keyword
//! ([`intent`]); anything not understood gets "não entendi", the menu and the word "atendente".
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

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, NaiveDate, TimeDelta, Utc};
use serde_json::{Value, json};

use crate::domain::Cents;
use crate::jobs::{Replier, Turn, TurnHandler};
use crate::ledger::normalize::parse_instant;
use crate::ledger::{Executor, Outcome, Tool};
use crate::messages::{GuidedText as T, KindsText, guided, kinds, unheard_voice, when_at};
use crate::store::InboundMessage;
use crate::whatsapp::message::{BUTTON_ID_MAX, LIST_ROWS_MAX};
use crate::whatsapp::{ListRow, stored};

mod address;
mod click;
mod intent;
mod mine;
mod screen;
#[cfg(test)]
mod tests;

use click::Click;
use intent::{Intent, intent};
use mine::Purpose;
use screen::{Choices, Screen, build, button, day_label, page_of, paged, row, when};

/// What the days and times are being picked for: a new booking, or moving one (same service
/// and professional). It decides the ids of the rows, so the next click keeps going.
#[derive(Debug, Clone, Copy)]
enum Pick {
    New { service: i64, professional: i64 },
    Move { booking: i64, service: i64, professional: i64 },
}

impl Pick {
    fn service(self) -> i64 {
        match self {
            Self::New { service, .. } | Self::Move { service, .. } => service,
        }
    }

    /// 0: any professional.
    fn professional(self) -> i64 {
        match self {
            Self::New { professional, .. } | Self::Move { professional, .. } => professional,
        }
    }

    fn day(self, date: NaiveDate, page: usize) -> Click {
        match self {
            Self::New { service, professional } => Click::Day { service, professional, date, page },
            Self::Move { booking, .. } => Click::MoveDay { booking, date, page },
        }
    }

    fn time(self, professional: i64, at: DateTime<Utc>) -> Click {
        match self {
            Self::New { service, .. } => Click::Time { service, professional, at },
            Self::Move { booking, .. } => Click::MoveTime { booking, at },
        }
    }
}

/// Days looked at when offering dates: two weeks covers a weekly schedule twice.
pub(super) const DAYS_AHEAD: i64 = 14;
/// A list holds at most ten rows; a longer one is paged, the tenth row opening the next page.
pub(super) const PAGE_ROWS: usize = LIST_ROWS_MAX - 1;
/// Meta accepts button ids up to 256 characters; every id we send is far shorter, so a longer
/// one was not ours and is not even split.
pub(super) const CLICK_ID_MAX: usize = BUTTON_ID_MAX;
/// How instants travel in ids: minutes in UTC, short and unambiguous.
pub(super) const ID_INSTANT: &str = "%Y-%m-%dT%H:%MZ";

pub struct GuidedTurn {
    pub executor: Executor,
    pub tools: Vec<Arc<dyn Tool>>,
    pub replier: Replier,
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
        Ok(Screen::new(
            guided(T::Menu { business: &turn.tenant.name, customer: turn.contact.profile_name.as_deref() })?,
            Choices::Buttons(vec![
                button(&Click::Book { page: 0 }, &guided(T::MenuBook)?),
                button(&Click::Mine { page: 0 }, &guided(T::MenuMine)?),
            ]),
        ))
    }

    async fn services(&self, turn: &Turn, page: usize) -> anyhow::Result<Screen> {
        let Some(v) = self.value(turn, "list_services", json!({})).await? else { return self.problem(turn).await };
        let rows = v["services"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| {
                let price = s["price"].as_str().and_then(|p| Cents::parse_brl(p).ok()).map(|p| p.to_string());
                Some(row(
                    &Click::Service { service: s["id"].as_i64()?, page: 0 },
                    s["name"].as_str()?,
                    price.as_deref(),
                ))
            })
            .collect();
        let more = guided(T::MoreOptions)?;
        let rows = paged(rows, page, |next| Ok(row(&Click::Book { page: next }, &more, None)))?;
        Ok(Screen::new(guided(T::ChooseService)?, Choices::List { button: guided(T::ServicesButton)?, rows }))
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
        Ok(Screen::new(
            guided(T::ChooseProfessional { service: name })?,
            Choices::List { button: guided(T::ProfessionalsButton)?, rows },
        ))
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

    /// The days with a free time for what is being picked (a new booking, or a move).
    async fn days(&self, turn: &Turn, pick: Pick) -> anyhow::Result<Screen> {
        let tz = turn.tenant.timezone;
        let today = Utc::now().with_timezone(&tz).date_naive();
        let mut rows = Vec::new();
        for offset in 0..DAYS_AHEAD {
            let date = today + TimeDelta::days(offset);
            if !self.slots(turn, pick.service(), pick.professional(), date).await?.is_empty() {
                rows.push(row(&pick.day(date, 0), &day_label(date)?, None));
            }
            if rows.len() == LIST_ROWS_MAX {
                break;
            }
        }
        if rows.is_empty() {
            let mut screen = self.menu(turn).await?;
            screen.text = guided(match pick {
                Pick::New { .. } => T::NoDays,
                Pick::Move { .. } => T::NoDaysToMove,
            })?;
            return Ok(screen);
        }
        let text = match pick {
            Pick::New { .. } => guided(T::ChooseDay)?,
            Pick::Move { .. } => guided(T::ChooseNewDay)?,
        };
        Ok(Screen::new(text, Choices::List { button: guided(T::DaysButton)?, rows }))
    }

    async fn times(
        &self,
        turn: &Turn,
        pick: Pick,
        date: NaiveDate,
        page: usize,
        text: Option<String>,
    ) -> anyhow::Result<Screen> {
        let tz = turn.tenant.timezone;
        let mut slots = self.slots(turn, pick.service(), pick.professional(), date).await?;
        // "Qualquer profissional": each time once, taken by the first professional free then.
        let mut seen = std::collections::HashSet::new();
        slots.retain(|s| seen.insert(s["starts_at"].as_str().unwrap_or_default().to_owned()));
        let rows: Vec<ListRow> = slots
            .iter()
            .filter_map(|s| {
                let at = parse_instant(s["starts_at"].as_str()?).ok()?;
                let click = pick.time(s["professional_id"].as_i64()?, at);
                let time = at.with_timezone(&tz).format("%H:%M").to_string();
                Some(row(&click, &time, s["professional_name"].as_str()))
            })
            .collect();
        if rows.is_empty() {
            return self.days(turn, pick).await;
        }
        let more = guided(T::MoreTimes)?;
        let rows = paged(rows, page, |next| Ok(row(&pick.day(date, next), &more, None)))?;
        let text = match text {
            Some(t) => t,
            None => guided(T::ChooseTime { day: &day_label(date)? })?,
        };
        Ok(Screen::new(text, Choices::List { button: guided(T::TimesButton)?, rows }))
    }

    /// Proposes the booking: its Confirmar/Cancelar buttons are the next screen, sent with the
    /// proposal. A click on them is handled without this menu, so a button tapped again later
    /// (after a cancel, say) finds its action already used and books nothing.
    async fn propose(&self, turn: &Turn, service: i64, professional: i64, at: DateTime<Utc>) -> anyhow::Result<Screen> {
        // The same spelling as the id, so a replayed click is the same call for the ledger.
        let starts_at = at.format(ID_INSTANT).to_string();
        let input = json!({ "service_id": service, "professional_id": professional, "starts_at": starts_at });
        let outcome = self.call(turn, "propose_booking", input).await?;
        self.proposed(turn, outcome, Pick::New { service, professional }, at).await
    }

    /// The screen after a booking or move proposal: nothing (its buttons went out), the day's
    /// other times when the slot was taken, or the customer's bookings when they are busy then.
    async fn proposed(&self, turn: &Turn, outcome: Outcome, pick: Pick, at: DateTime<Utc>) -> anyhow::Result<Screen> {
        match outcome {
            Outcome::Executed(_) | Outcome::AlreadyDone(_) => Ok(Screen::sent()),
            Outcome::Failed { details, .. }
                if details["reason"] == "slot_taken" || details["reason"] == "not_available" =>
            {
                let date = at.with_timezone(&turn.tenant.timezone).date_naive();
                self.times(turn, pick, date, 0, Some(guided(T::SlotTaken)?)).await
            }
            Outcome::Failed { details, .. } if details["reason"] == "customer_busy" => {
                let mut screen = self.mine(turn, 0, Purpose::Manage).await?;
                screen.text = guided(T::AlreadyBooked { when: &when_at(turn.tenant.timezone, at) })?;
                Ok(screen)
            }
            _ => self.problem(turn).await,
        }
    }

    async fn problem(&self, turn: &Turn) -> anyhow::Result<Screen> {
        let mut screen = self.menu(turn).await?;
        screen.text = guided(T::Problem)?;
        Ok(screen)
    }

    /// Decides the next screen from the turn's last message it can read (a text, a tap, a heard
    /// voice note, an edit); a turn of media only is told, once, what the menu can do.
    async fn screen(&self, turn: &Turn) -> anyhow::Result<Screen> {
        let readable = |m: &&InboundMessage| m.reply_id.is_some() || m.kind == "text" || m.kind == "edit";
        let Some(last) = turn.messages.iter().rev().find(readable) else {
            return match turn.messages.last() {
                Some(m) if m.kind != stored::WELCOME => {
                    let mut screen = self.menu(turn).await?;
                    screen.text = kinds(KindsText::MediaReceived { kind: &m.kind })?;
                    Ok(screen)
                }
                _ => self.menu(turn).await,
            };
        };
        let click = last.reply_id.as_deref().and_then(Click::parse);
        match click {
            Some(Click::Menu) => self.menu(turn).await,
            Some(Click::Book { page }) => self.services(turn, page).await,
            Some(Click::Mine { page }) => self.mine(turn, page, Purpose::Manage).await,
            Some(Click::MoveList { page }) => self.mine(turn, page, Purpose::Move).await,
            Some(Click::CancelList { page }) => self.mine(turn, page, Purpose::Cancel).await,
            Some(Click::Service { service, page }) => self.professionals(turn, service, page).await,
            Some(Click::Professional { service, professional }) => {
                self.days(turn, Pick::New { service, professional }).await
            }
            Some(Click::Day { service, professional, date, page }) => {
                self.times(turn, Pick::New { service, professional }, date, page, None).await
            }
            // `g:ok` and `g:cancelok` were confirmations before pending actions; a tap on one
            // found in an old chat now only proposes again.
            Some(Click::Time { service, professional, at } | Click::Confirm { service, professional, at }) => {
                self.propose(turn, service, professional, at).await
            }
            Some(Click::Cancel { booking } | Click::CancelConfirmed { booking }) => {
                self.propose_cancel(turn, booking).await
            }
            Some(Click::Booking { booking }) => self.booking(turn, booking).await,
            Some(Click::Move { booking }) => self.move_days(turn, booking).await,
            Some(Click::MoveDay { booking, date, page }) => self.move_times(turn, booking, date, page).await,
            Some(Click::MoveTime { booking, at }) => self.propose_move(turn, booking, at).await,
            None => match intent(last.body.as_deref().unwrap_or("")) {
                Intent::Mine => self.mine(turn, 0, Purpose::Manage).await,
                Intent::Move => self.mine(turn, 0, Purpose::Move).await,
                Intent::Cancel => self.mine(turn, 0, Purpose::Cancel).await,
                Intent::Book | Intent::Prices => self.services(turn, 0).await,
                Intent::Address => self.address(turn).await,
                Intent::Greeting => self.menu(turn).await,
                Intent::Thanks => Ok(Screen::new(guided(T::YoureWelcome)?, Choices::None)),
                Intent::Unknown => {
                    let mut screen = self.menu(turn).await?;
                    let customer = turn.contact.profile_name.as_deref();
                    screen.text = guided(T::NotUnderstood { business: &turn.tenant.name, customer })?;
                    Ok(screen)
                }
            },
        }
    }
}

#[async_trait]
impl TurnHandler for GuidedTurn {
    async fn handle(&self, turn: &Turn) -> anyhow::Result<()> {
        let mut screen = self.screen(turn).await?;
        // A voice note that could not be heard beside what was read is said so, in the answer.
        let unheard: Vec<bool> = turn.messages.iter().filter_map(InboundMessage::unheard_voice).collect();
        if !unheard.is_empty() && !screen.is_sent() {
            screen.text = format!("{}\n\n{}", unheard_voice(unheard.contains(&true))?, screen.text);
        }
        let mut seq = 0;
        if let Some(lead) = screen.lead.take() {
            self.replier.reply(turn, seq, lead);
            seq += 1;
        }
        if !screen.is_sent() {
            self.replier.reply(turn, seq, build(screen));
        }
        Ok(())
    }
}
