//! The customer's bookings: "Meus horários" lists them; one chosen offers to move or cancel
//! it. A move picks a day and a time for the same service and professional and is proposed
//! like a cancellation: nothing changes until the customer taps Confirmar.

use chrono::{DateTime, NaiveDate, Utc};
use serde_json::{Value, json};

use super::{Choices, T, guided};
use super::{Click, GuidedTurn, ID_INSTANT, Pick, Screen, button, page_of, row, when};
use crate::jobs::Turn;
use crate::ledger::Outcome;
use crate::whatsapp::ListRow;

/// Why the bookings are listed: what a row opens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Purpose {
    /// "Meus horários": a booking opens its choices (move, cancel).
    Manage,
    /// "remarcar": a booking opens its days.
    Move,
    /// "cancelar": a booking is proposed for cancelling.
    Cancel,
}

impl GuidedTurn {
    /// The customer's upcoming bookings (as `list_my_bookings` shows them); `None` when the
    /// tool could not answer.
    async fn bookings(&self, turn: &Turn) -> anyhow::Result<Option<Vec<Value>>> {
        Ok(self.value(turn, "list_my_bookings", json!({})).await?.map(|v| {
            v["bookings"].as_array().into_iter().flatten().filter(|b| b["booking_id"].is_i64()).cloned().collect()
        }))
    }

    /// One of the customer's bookings; `None` when it is no longer theirs or no longer upcoming.
    async fn one_booking(&self, turn: &Turn, booking: i64) -> anyhow::Result<Option<Value>> {
        Ok(self.bookings(turn).await?.and_then(|all| all.into_iter().find(|b| b["booking_id"] == booking)))
    }

    pub(super) async fn mine(&self, turn: &Turn, page: usize, purpose: Purpose) -> anyhow::Result<Screen> {
        let Some(bookings) = self.bookings(turn).await? else { return self.problem(turn).await };
        let tz = turn.tenant.timezone;
        if bookings.is_empty() {
            let mut screen = self.menu(turn).await?;
            screen.text = guided(T::NoBookings)?;
            return Ok(screen);
        }
        let (range, next) = page_of(bookings.len(), page);
        let shown = &bookings[range];
        let lines = shown.iter().map(|b| line(tz, b)).collect();
        let mut rows: Vec<ListRow> = shown
            .iter()
            .filter_map(|b| {
                let booking = b["booking_id"].as_i64()?;
                let click = match purpose {
                    Purpose::Manage => Click::Booking { booking },
                    Purpose::Move => Click::Move { booking },
                    Purpose::Cancel => Click::Cancel { booking },
                };
                Some(row(&click, &when(tz, b["starts_at"].as_str().unwrap_or("")), b["service"].as_str()))
            })
            .collect();
        if let Some(next) = next {
            // The next page opens the same kind of list.
            let more = match purpose {
                Purpose::Manage => Click::Mine { page: next },
                Purpose::Move => Click::MoveList { page: next },
                Purpose::Cancel => Click::CancelList { page: next },
            };
            rows.push(row(&more, &guided(T::MoreOptions)?, None));
        }
        let (ask, list) = match purpose {
            Purpose::Manage => (T::WhichToChange, T::ChooseBookingButton),
            Purpose::Move => (T::WhichToMove, T::ChooseBookingButton),
            Purpose::Cancel => (T::WhichToCancel, T::CancelButton),
        };
        Ok(Screen::new(
            guided(T::Bookings { lines, ask: &guided(ask)? })?,
            Choices::List { button: guided(list)?, rows },
        ))
    }

    /// A booking chosen: move it, cancel it, or back to the menu.
    pub(super) async fn booking(&self, turn: &Turn, booking: i64) -> anyhow::Result<Screen> {
        let Some(b) = self.one_booking(turn, booking).await? else { return self.mine(turn, 0, Purpose::Manage).await };
        Ok(Screen::new(
            guided(T::BookingChosen { line: &line(turn.tenant.timezone, &b) })?,
            Choices::Buttons(vec![
                button(&Click::Move { booking }, &guided(T::MoveButton)?),
                button(&Click::Cancel { booking }, &guided(T::CancelBookingButton)?),
                button(&Click::Menu, &guided(T::BackToMenu)?),
            ]),
        ))
    }

    /// What a move picks from: the booking's service with its professional.
    async fn move_pick(&self, turn: &Turn, booking: i64) -> anyhow::Result<Option<Pick>> {
        Ok(self.one_booking(turn, booking).await?.and_then(|b| {
            Some(Pick::Move {
                booking,
                service: b["service_id"].as_i64()?,
                professional: b["professional_id"].as_i64()?,
            })
        }))
    }

    pub(super) async fn move_days(&self, turn: &Turn, booking: i64) -> anyhow::Result<Screen> {
        match self.move_pick(turn, booking).await? {
            Some(pick) => self.days(turn, pick).await,
            None => self.mine(turn, 0, Purpose::Manage).await,
        }
    }

    pub(super) async fn move_times(
        &self,
        turn: &Turn,
        booking: i64,
        date: NaiveDate,
        page: usize,
    ) -> anyhow::Result<Screen> {
        match self.move_pick(turn, booking).await? {
            Some(pick) => self.times(turn, pick, date, page, None).await,
            None => self.mine(turn, 0, Purpose::Manage).await,
        }
    }

    /// Proposes the move: its Confirmar / Manter horário buttons are the next screen.
    pub(super) async fn propose_move(&self, turn: &Turn, booking: i64, at: DateTime<Utc>) -> anyhow::Result<Screen> {
        let Some(pick) = self.move_pick(turn, booking).await? else {
            return self.mine(turn, 0, Purpose::Manage).await;
        };
        // The same spelling as the id, so a replayed click is the same call for the ledger.
        let input = json!({ "booking_id": booking, "starts_at": at.format(ID_INSTANT).to_string() });
        let outcome = self.call(turn, "propose_move", input).await?;
        self.proposed(turn, outcome, pick, at).await
    }

    /// Proposes the cancellation: its buttons are the next screen.
    pub(super) async fn propose_cancel(&self, turn: &Turn, booking: i64) -> anyhow::Result<Screen> {
        match self.call(turn, "cancel_booking", json!({ "booking_id": booking })).await? {
            Outcome::Executed(_) | Outcome::AlreadyDone(_) => Ok(Screen::sent()),
            _ => self.mine(turn, 0, Purpose::Manage).await,
        }
    }
}

/// A booking as one line: `05/12 14:30 — Corte com Zé`.
fn line(tz: chrono_tz::Tz, b: &Value) -> String {
    format!(
        "{} — {} com {}",
        when(tz, b["starts_at"].as_str().unwrap_or("")),
        b["service"].as_str().unwrap_or("?"),
        b["professional"].as_str().unwrap_or("?")
    )
}
