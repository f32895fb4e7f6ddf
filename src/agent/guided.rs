//! The guided agent: a deterministic menu with WhatsApp lists and reply buttons, for tenants
//! without a model and as the fallback when the model provider fails.
//!
//! service → professional (or any) → day → time → confirm; "meus horários"; cancel with a
//! confirmation button. Button and list ids carry everything the next step needs (`g:…`), so a
//! click is understood without stored menu state; a stale or replayed click is answered from
//! the same tools and executor as the model uses, so a replayed "Confirmar" gets
//! `already_done`, never a second booking. Anything not understood brings back the menu.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{Datelike, TimeDelta, Utc};
use serde_json::{Value, json};

use crate::ledger::normalize::{normalize_text, parse_instant};
use crate::ledger::{Executor, Outcome, Tool};
use crate::messages::{GuidedText as T, guided};
use crate::outbox::Replier;
use crate::turn::{Turn, TurnHandler};
use crate::whatsapp::{ListRow, ListSection, OutboundMessage, ReplyButton};

/// Days looked at when offering dates: a list holds at most 10 rows.
const DAYS_AHEAD: i64 = 14;
const LIST_ROWS: usize = 10;

pub struct GuidedTurn {
    pub executor: Executor,
    pub tools: Vec<Arc<dyn Tool>>,
    pub replier: Replier,
}

/// The next screen: a text and, optionally, choices.
struct Screen {
    text: String,
    choices: Choices,
}

enum Choices {
    None,
    Buttons(Vec<ReplyButton>),
    List { button: String, rows: Vec<ListRow> },
}

fn button(id: String, title: String) -> ReplyButton {
    ReplyButton { id, title: title.chars().take(20).collect() }
}

fn row(id: String, title: String, description: Option<String>) -> ListRow {
    ListRow {
        id,
        title: title.chars().take(24).collect(),
        description: description.map(|d| d.chars().take(72).collect()),
    }
}

fn when(tz: chrono_tz::Tz, at: &str) -> String {
    parse_instant(at).map(|t| t.with_timezone(&tz).format("%d/%m %H:%M").to_string()).unwrap_or_else(|_| at.to_owned())
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
                button("g:book".into(), guided(T::MenuBook)?),
                button("g:mine".into(), guided(T::MenuMine)?),
            ]),
        })
    }

    async fn services(&self, turn: &Turn) -> anyhow::Result<Screen> {
        let Some(v) = self.value(turn, "list_services", json!({})).await? else { return self.problem(turn).await };
        let rows = v["services"]
            .as_array()
            .into_iter()
            .flatten()
            .take(LIST_ROWS)
            .map(|s| {
                row(
                    format!("g:svc:{}", s["id"]),
                    s["name"].as_str().unwrap_or("?").to_owned(),
                    s["price"].as_str().map(|p| format!("R$ {}", p.replace('.', ","))),
                )
            })
            .collect();
        Ok(Screen {
            text: guided(T::ChooseService)?,
            choices: Choices::List { button: guided(T::ServicesButton)?, rows },
        })
    }

    async fn professionals(&self, turn: &Turn, service: i64) -> anyhow::Result<Screen> {
        let Some(v) = self.value(turn, "list_services", json!({})).await? else { return self.problem(turn).await };
        let Some(s) = v["services"].as_array().into_iter().flatten().find(|s| s["id"] == service) else {
            return self.services(turn).await;
        };
        let mut rows = vec![row(format!("g:pro:{service}:0"), guided(T::AnyProfessional)?, None)];
        rows.extend(
            s["professionals"].as_array().into_iter().flatten().take(LIST_ROWS - 1).map(|p| {
                row(format!("g:pro:{service}:{}", p["id"]), p["name"].as_str().unwrap_or("?").to_owned(), None)
            }),
        );
        let name = s["name"].as_str().unwrap_or("?");
        Ok(Screen {
            text: guided(T::ChooseProfessional { service: name })?,
            choices: Choices::List { button: guided(T::ProfessionalsButton)?, rows },
        })
    }

    async fn slots(&self, turn: &Turn, service: i64, professional: i64, date: &str) -> anyhow::Result<Vec<Value>> {
        let mut input = json!({ "service_id": service, "date": date });
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
            let day = today + TimeDelta::days(offset);
            if !self.slots(turn, service, professional, &day.to_string()).await?.is_empty() {
                let date = day.format("%d/%m").to_string();
                let label = guided(T::Day { date: &date, weekday: day.weekday().num_days_from_monday() })?;
                rows.push(row(format!("g:day:{service}:{professional}:{day}"), label, None));
            }
            if rows.len() == LIST_ROWS {
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
        date: &str,
        text: Option<String>,
    ) -> anyhow::Result<Screen> {
        let tz = turn.tenant.timezone;
        let rows: Vec<ListRow> = self
            .slots(turn, service, professional, date)
            .await?
            .iter()
            .take(LIST_ROWS)
            .filter_map(|s| {
                let at = parse_instant(s["starts_at"].as_str()?).ok()?;
                Some(row(
                    format!("g:time:{service}:{}:{}", s["professional_id"], at.format("%Y-%m-%dT%H:%MZ")),
                    at.with_timezone(&tz).format("%H:%M").to_string(),
                    s["professional_name"].as_str().map(str::to_owned),
                ))
            })
            .collect();
        if rows.is_empty() {
            return self.days(turn, service, professional).await;
        }
        let day = date.to_owned();
        let text = match text {
            Some(t) => t,
            None => guided(T::ChooseTime { day: &day })?,
        };
        Ok(Screen { text, choices: Choices::List { button: guided(T::TimesButton)?, rows } })
    }

    async fn confirm(&self, turn: &Turn, service: i64, professional: i64, at: &str) -> anyhow::Result<Screen> {
        let Some(v) = self.value(turn, "list_services", json!({})).await? else { return self.problem(turn).await };
        let s = v["services"].as_array().into_iter().flatten().find(|s| s["id"] == service);
        let p = s.and_then(|s| s["professionals"].as_array().into_iter().flatten().find(|p| p["id"] == professional));
        let (Some(s), Some(p)) = (s, p) else { return self.services(turn).await };
        let when = when(turn.tenant.timezone, at);
        Ok(Screen {
            text: guided(T::Confirm {
                service: s["name"].as_str().unwrap_or("?"),
                professional: p["name"].as_str().unwrap_or("?"),
                when: &when,
            })?,
            choices: Choices::Buttons(vec![
                button(format!("g:ok:{service}:{professional}:{at}"), guided(T::ConfirmButton)?),
                button(format!("g:pro:{service}:{professional}"), guided(T::OtherTime)?),
            ]),
        })
    }

    async fn book(&self, turn: &Turn, service: i64, professional: i64, at: &str) -> anyhow::Result<Screen> {
        let input = json!({ "service_id": service, "professional_id": professional, "starts_at": at });
        let tz = turn.tenant.timezone;
        let text = match self.call(turn, "create_booking", input).await? {
            Outcome::Executed(v) => guided(T::Booked {
                service: v["service"].as_str().unwrap_or("?"),
                professional: v["professional"].as_str().unwrap_or("?"),
                when: &when(tz, v["starts_at"].as_str().unwrap_or(at)),
            })?,
            Outcome::AlreadyDone(v) => {
                guided(T::AlreadyBooked { when: &when(tz, v["starts_at"].as_str().unwrap_or(at)) })?
            }
            Outcome::Failed { details, .. }
                if details["reason"] == "slot_taken" || details["reason"] == "not_available" =>
            {
                let date = parse_instant(at).map(|t| t.with_timezone(&tz).date_naive().to_string()).unwrap_or_default();
                return self.times(turn, service, professional, &date, Some(guided(T::SlotTaken)?)).await;
            }
            _ => return self.problem(turn).await,
        };
        Ok(Screen { text, choices: Choices::None })
    }

    async fn mine(&self, turn: &Turn) -> anyhow::Result<Screen> {
        let Some(v) = self.value(turn, "list_my_bookings", json!({})).await? else { return self.problem(turn).await };
        let tz = turn.tenant.timezone;
        let bookings: Vec<&Value> = v["bookings"].as_array().into_iter().flatten().collect();
        if bookings.is_empty() {
            let mut screen = self.menu(turn).await?;
            screen.text = guided(T::NoBookings)?;
            return Ok(screen);
        }
        let label = |b: &Value| {
            format!(
                "{} — {} com {}",
                when(tz, b["starts_at"].as_str().unwrap_or("")),
                b["service"].as_str().unwrap_or("?"),
                b["professional"].as_str().unwrap_or("?")
            )
        };
        let rows = bookings
            .iter()
            .take(LIST_ROWS)
            .map(|b| {
                row(
                    format!("g:cancel:{}", b["booking_id"]),
                    when(tz, b["starts_at"].as_str().unwrap_or("")),
                    b["service"].as_str().map(str::to_owned),
                )
            })
            .collect();
        Ok(Screen {
            text: guided(T::Bookings { lines: bookings.iter().take(LIST_ROWS).map(|b| label(b)).collect() })?,
            choices: Choices::List { button: guided(T::CancelButton)?, rows },
        })
    }

    async fn confirm_cancel(&self, turn: &Turn, booking: i64) -> anyhow::Result<Screen> {
        let Some(v) = self.value(turn, "list_my_bookings", json!({})).await? else { return self.problem(turn).await };
        let Some(b) = v["bookings"].as_array().into_iter().flatten().find(|b| b["booking_id"] == booking) else {
            return self.mine(turn).await;
        };
        let when = when(turn.tenant.timezone, b["starts_at"].as_str().unwrap_or(""));
        Ok(Screen {
            text: guided(T::ConfirmCancel { when: &when })?,
            choices: Choices::Buttons(vec![
                button(format!("g:cancelok:{booking}"), guided(T::CancelYes)?),
                button("g:menu".into(), guided(T::CancelNo)?),
            ]),
        })
    }

    async fn cancel(&self, turn: &Turn, booking: i64) -> anyhow::Result<Screen> {
        let tz = turn.tenant.timezone;
        let text = match self.call(turn, "cancel_booking", json!({ "booking_id": booking })).await? {
            Outcome::Executed(v) => guided(T::Cancelled { when: &when(tz, v["starts_at"].as_str().unwrap_or("")) })?,
            Outcome::AlreadyDone(_) => guided(T::AlreadyCancelled)?,
            _ => return self.mine(turn).await,
        };
        Ok(Screen { text, choices: Choices::None })
    }

    async fn problem(&self, turn: &Turn) -> anyhow::Result<Screen> {
        let mut screen = self.menu(turn).await?;
        screen.text = guided(T::Problem)?;
        Ok(screen)
    }

    /// Decides the next screen from the turn's last message.
    async fn screen(&self, turn: &Turn) -> anyhow::Result<Screen> {
        let Some(last) = turn.messages.last() else { return self.menu(turn).await };
        let id = last.reply_id.as_deref().unwrap_or("");
        let parts: Vec<&str> = id.split(':').collect();
        let n = |i: usize| parts.get(i).and_then(|p| p.parse::<i64>().ok());
        // A time id holds its own colons (HH:MM): rejoin the tail.
        let tail = |from: usize| parts.get(from..).map(|p| p.join(":")).unwrap_or_default();
        match parts.as_slice() {
            ["g", "book"] => self.services(turn).await,
            ["g", "mine"] => self.mine(turn).await,
            ["g", "svc", _] => match n(2) {
                Some(s) => self.professionals(turn, s).await,
                None => self.menu(turn).await,
            },
            ["g", "pro", _, _] => match (n(2), n(3)) {
                (Some(s), Some(p)) => self.days(turn, s, p).await,
                _ => self.menu(turn).await,
            },
            ["g", "day", _, _, date] => match (n(2), n(3)) {
                (Some(s), Some(p)) => self.times(turn, s, p, date, None).await,
                _ => self.menu(turn).await,
            },
            ["g", "time", _, _, ..] => match (n(2), n(3)) {
                (Some(s), Some(p)) => self.confirm(turn, s, p, &tail(4)).await,
                _ => self.menu(turn).await,
            },
            ["g", "ok", _, _, ..] => match (n(2), n(3)) {
                (Some(s), Some(p)) => self.book(turn, s, p, &tail(4)).await,
                _ => self.menu(turn).await,
            },
            ["g", "cancel", _] => match n(2) {
                Some(b) => self.confirm_cancel(turn, b).await,
                None => self.menu(turn).await,
            },
            ["g", "cancelok", _] => match n(2) {
                Some(b) => self.cancel(turn, b).await,
                None => self.menu(turn).await,
            },
            _ => {
                let text = normalize_text(last.body.as_deref().unwrap_or(""));
                if text.contains("meus horarios") || text.contains("meus horários") {
                    self.mine(turn).await
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
        let message = match screen.choices {
            Choices::None => OutboundMessage::text(screen.text)?,
            Choices::Buttons(buttons) => OutboundMessage::buttons(screen.text, None, buttons)?,
            Choices::List { button, rows } => {
                OutboundMessage::list(screen.text, None, button, vec![ListSection { title: None, rows }])?
            }
        };
        self.replier.reply(turn, 0, message).await?;
        Ok(())
    }
}
