//! A customer's part of a run, one of:
//! - only saying hello;
//! - booking (the model repeating itself, or forgetting and booking again), maybe moving (maybe
//!   onto another customer's time), maybe cancelling with a button: double clicks, a typed
//!   "yes" racing the click, every server killed just after it, stale clicks, or a click after
//!   the proposal expired;
//! - booking a service with a deposit: the Pix arrives (the provider failing once, sometimes),
//!   is paid and notified, and the hold becomes a booking;
//! - booking the time whose reminder comes due within the run ([`super::Cast::reminder_at`]),
//!   and answering the reminder: "Confirmo" (double clicks too), or "Preciso cancelar" and the cancellation.

use std::time::Duration;

use balcao::domain::{ClickId, Decision};
use chrono::{DateTime, TimeDelta, Utc};
use serde_json::json;

use super::{CPF, Player, REMINDER_HOURS, STEP, confirm_button, spell, start};
use crate::OUTBOX_GRACE;
use crate::db::on;
use crate::faults::Fault;
use crate::graph::Sent;
use crate::psp::fake_asaas::{Fault as PspFault, Route};
use crate::rng::Rng;

/// How often servers sweep for due reminders (`SWEEP_EVERY` in the server).
const REMINDER_SWEEP: Duration = Duration::from_secs(15);

impl Player<'_> {
    pub(super) async fn customer(&self, c: usize, slot: u64, mut rng: Rng) -> anyhow::Result<()> {
        let me = self.cast.customers[c].clone();
        self.ask(&mut rng, &me, "oi").await;
        match rng.below(20) {
            0..4 => Ok(()),
            4..6 => self.deposit(&mut rng, &me, slot).await,
            6..9 => match self.cast.reminder_at {
                Some(at) => self.reminded(&mut rng, &me, at).await,
                None => self.book_move_cancel(&mut rng, &me, slot).await,
            },
            _ => self.book_move_cancel(&mut rng, &me, slot).await,
        }
    }

    /// Asks the model to book `service` at `at`, repeating the call in one response.
    async fn book(&self, rng: &mut Rng, me: &str, service: i64, at: DateTime<Utc>) -> anyhow::Result<String> {
        let (at, alt) = spell(at)?;
        let book = format!(
            "#book service={service} professional={} at={at} alt={alt} copies={}",
            self.cast.professional,
            rng.between(1, 3)
        );
        self.ask(rng, me, &book).await;
        Ok(book)
    }

    async fn book_move_cancel(&self, rng: &mut Rng, me: &str, slot: u64) -> anyhow::Result<()> {
        let book = self.book(rng, me, self.cast.service, start(slot)?).await?;
        if rng.chance(0.3) {
            self.ctx.faults.add(Fault::ModelForgets);
            self.ask(rng, me, &book).await;
        }
        if rng.chance(0.3)
            && let Some(booking) = self.booking_of(me).await?
        {
            // A move, maybe onto another customer's time (the overlap constraint decides).
            let (to, _) = spell(start(rng.below(6))?)?;
            let moving = format!("#move booking={booking} at={to} copies={}", rng.between(1, 2));
            self.ask(rng, me, &moving).await;
        }
        if !rng.chance(0.5) {
            return Ok(());
        }
        let Some(booking) = self.booking_of(me).await? else { return Ok(()) };
        let before = self.ctx.graph.count_to(&self.cast.number, me);
        let cancel = format!("#cancel booking={booking} copies={}", rng.between(1, 2));
        self.text(rng, me, &cancel).await;
        let offer = self.ctx.graph.wait_for(&self.cast.number, me, before, STEP, |s| !s.buttons().is_empty()).await;
        match offer.and_then(|o| confirm_button(&o)) {
            Some(confirm) => self.confirm_cancellation(rng, me, &confirm, booking).await,
            None => Ok(()),
        }
    }

    /// Clicks Confirmar on the cancellation of `booking`: several times, with a typed "yes"
    /// racing it, every server killed just after; or only after the proposal expired, which
    /// must change nothing.
    async fn confirm_cancellation(&self, rng: &mut Rng, me: &str, confirm: &str, booking: i64) -> anyhow::Result<()> {
        let before = self.ctx.graph.count_to(&self.cast.number, me);
        if rng.chance(0.15)
            && let Some(click) = ClickId::parse(confirm)
        {
            self.ctx.faults.add(Fault::ExpiredClick);
            // Its row aged past its expiry, as half an hour passing would: the server judges
            // the click by the time it was received against `expires_at`.
            let aged = format!(
                "UPDATE pending_actions SET expires_at = created_at WHERE tenant_id = $1 AND id = '{}'",
                click.action
            );
            self.ctx.db.execute(&aged, self.cast.tenant).await?;
            let times = rng.between(1, 2);
            self.click(rng, me, confirm, times, false).await;
            let refused =
                self.ctx.graph.wait_for(&self.cast.number, me, before, STEP, |s| s.text().contains("expirou"));
            self.ctx.coverage.add("expired clicks refused", u64::from(refused.await.is_some()));
            if self.status_of(booking).await?.as_deref() != Some("confirmed") {
                self.problem(format!("booking {booking} changed by a click on its expired cancellation"));
            }
            return Ok(());
        }
        let (times, typed) = (rng.between(1, 3), rng.chance(0.25));
        self.click(rng, me, confirm, times, typed).await;
        if rng.chance(0.1 * self.ctx.share) {
            // Every server, so the one that took the click is among them.
            self.ctx.faults.add(Fault::KillAfterClick);
            tokio::time::sleep(Duration::from_millis(rng.below(150))).await;
            self.ctx.meta.cluster.kill_all().await?;
        }
        self.ctx.graph.wait_for(&self.cast.number, me, before, STEP, |_| true).await;
        if rng.chance(0.3) {
            self.ctx.faults.add(Fault::StaleClick);
            self.click(rng, me, confirm, 1, false).await;
        }
        Ok(())
    }

    /// Books the service with a deposit, pays the Pix that comes for it.
    async fn deposit(&self, rng: &mut Rng, me: &str, slot: u64) -> anyhow::Result<()> {
        if rng.chance(0.3) {
            self.ctx.faults.add(Fault::ProviderError);
            self.cast.asaas.fail(Route::CreatePayment, PspFault::Respond(500, json!({ "errors": [] })));
        }
        let before = self.ctx.graph.count_to(&self.cast.number, me);
        self.book(rng, me, self.cast.deposit_service, start(slot)?).await?;
        // Asaas needs the payer's CPF: the deposit sweep asks once and the customer answers
        // (twice, sometimes); one whose CPF is known already gets the hold's Pix at once.
        let pix_sent = |s: &Sent| s.text().contains("pague o sinal");
        let next =
            self.ctx.graph.wait_for(&self.cast.number, me, before, STEP, |s| s.text().contains("CPF") || pix_sent(s));
        let Some(next) = next.await else {
            // The time was taken (the overlap rule), or the run is slow: the invariants judge.
            return Ok(());
        };
        if !pix_sent(&next) {
            for _ in 0..rng.between(1, 2) {
                self.text(rng, me, CPF).await;
            }
        }
        if self.ctx.graph.wait_for(&self.cast.number, me, before, STEP, pix_sent).await.is_none() {
            return Ok(());
        }
        if rng.chance(0.3) {
            return self.cancel_held(rng, me).await;
        }
        let payments = self.cast.asaas.payments();
        let deposit = payments.iter().find(|p| p["description"].as_str().is_some_and(|d| d.starts_with("Sinal")));
        let Some(id) = deposit.and_then(|p| p["id"].as_str()) else {
            self.problem(format!("{me} got a deposit's Pix that the provider never created"));
            return Ok(());
        };
        self.pay(rng, id).await;
        let paid = |s: &Sent| s.text().contains("Recebemos o sinal");
        self.ctx.graph.wait_for(&self.cast.number, me, before, STEP, paid).await;
        Ok(())
    }

    /// Cancels the booking held for its deposit (its Pix sent, unpaid), confirming with one to
    /// three clicks: the booking is cancelled and its charge withdrawn at the provider.
    async fn cancel_held(&self, rng: &mut Rng, me: &str) -> anyhow::Result<()> {
        self.ctx.faults.add(Fault::CancelHeld);
        let Some(booking) = self.booking_in(me, "held").await? else { return Ok(()) };
        let before = self.ctx.graph.count_to(&self.cast.number, me);
        let cancel = format!("#cancel booking={booking} copies={}", rng.between(1, 2));
        self.text(rng, me, &cancel).await;
        let offer = self.ctx.graph.wait_for(&self.cast.number, me, before, STEP, |s| !s.buttons().is_empty()).await;
        if let Some(confirm) = offer.and_then(|o| confirm_button(&o)) {
            let times = rng.between(1, 3);
            self.click(rng, me, &confirm, times, false).await;
        }
        Ok(())
    }

    /// Books `at`, whose reminder comes due within the run, and answers the reminder.
    async fn reminded(&self, rng: &mut Rng, me: &str, at: DateTime<Utc>) -> anyhow::Result<()> {
        let before = self.ctx.graph.count_to(&self.cast.number, me);
        self.book(rng, me, self.cast.service, at).await?;
        let Some(booking) = self.booking_of(me).await? else { return Ok(()) };
        let due = at - TimeDelta::hours(REMINDER_HOURS);
        // A booking recorded after its reminder was due gets none (it was booked less than the
        // reminder's offset ahead): slow runs miss it, by design.
        if !self.created_before(booking, due).await? {
            return Ok(());
        }
        // The sweep's period, then the outbox's grace: a send cut off by a kill or a freeze goes
        // again only once the grace ran out (no status came), which the design asks for.
        let wait = (due - Utc::now()).to_std().unwrap_or_default() + REMINDER_SWEEP + OUTBOX_GRACE + STEP;
        let reminder =
            self.ctx.graph.wait_for(&self.cast.number, me, before, wait, |s| s.text().starts_with("Lembrete"));
        let Some(reminder) = reminder.await else {
            let trace = self.reminder_trace(booking).await.unwrap_or_else(|e| format!("unread: {e}"));
            self.problem(format!("booking {booking}: no reminder {wait:?} after it was due (due {due}; {trace})"));
            return Ok(());
        };
        let button = |wanted: Decision| {
            reminder.buttons().into_iter().find(|id| ClickId::parse(id).is_some_and(|c| c.decision == wanted))
        };
        let before = self.ctx.graph.count_to(&self.cast.number, me);
        if rng.chance(0.6) {
            let Some(yes) = button(Decision::Confirm) else { return Ok(()) };
            let times = rng.between(1, 3);
            self.click(rng, me, &yes, times, false).await;
            self.ctx.graph.wait_for(&self.cast.number, me, before, STEP, |s| s.text().contains("presença")).await;
            return Ok(());
        }
        // "Preciso cancelar" offers the cancellation, with its own buttons.
        let Some(no) = button(Decision::Decline) else { return Ok(()) };
        let times = rng.between(1, 2);
        self.click(rng, me, &no, times, false).await;
        let offer = self.ctx.graph.wait_for(&self.cast.number, me, before, STEP, |s| s.text().contains("cancelamento"));
        match offer.await.and_then(|o| confirm_button(&o)) {
            Some(confirm) => self.confirm_cancellation(rng, me, &confirm, booking).await,
            None => Ok(()),
        }
    }

    /// Where a late reminder is: when the sweep recorded it, and its outbox row.
    async fn reminder_trace(&self, booking: i64) -> anyhow::Result<String> {
        let sql = format!(
            "SELECT 'recorded ' || COALESCE((SELECT CAST(r.created_at AS TEXT) FROM reminders r \
                 WHERE r.tenant_id = $1 AND r.appointment_id = {booking} LIMIT 1), 'never') \
             || '; outbox ' || COALESCE((SELECT o.status || ', ' || CAST(o.attempts AS TEXT) || ' attempts, next ' \
                 || CAST(o.next_attempt_at AS TEXT) || ', sent ' || COALESCE(CAST(o.sent_at AS TEXT), '-') \
                 || ', error ' || COALESCE(o.last_error, '-') FROM outbound_messages o \
                 WHERE o.tenant_id = $1 AND o.idempotency_key LIKE 'reminder:{booking}:%' LIMIT 1), 'no row')"
        );
        self.ctx.db.text(&sql, self.cast.tenant).await
    }

    /// The customer's latest confirmed appointment.
    async fn booking_of(&self, wa_id: &str) -> anyhow::Result<Option<i64>> {
        self.booking_in(wa_id, "confirmed").await
    }

    /// The customer's latest booking in `status`.
    async fn booking_in(&self, wa_id: &str, status: &str) -> anyhow::Result<Option<i64>> {
        let sql = format!(
            "SELECT COALESCE(MAX(a.id), 0) FROM appointments a JOIN contacts c ON c.id = a.contact_id \
             WHERE a.tenant_id = $1 AND c.wa_id = '{wa_id}' AND a.status = '{status}'"
        );
        Ok(Some(self.ctx.db.count(&sql, self.cast.tenant).await?).filter(|id| *id > 0))
    }

    async fn status_of(&self, booking: i64) -> anyhow::Result<Option<String>> {
        let sql = "SELECT status FROM appointments WHERE tenant_id = $1 AND id = $2";
        Ok(
            on!(&self.ctx.db, pool => sqlx::query_scalar(sql).bind(self.cast.tenant).bind(booking).fetch_optional(pool).await?),
        )
    }

    async fn created_before(&self, booking: i64, due: DateTime<Utc>) -> anyhow::Result<bool> {
        let sql = "SELECT created_at FROM appointments WHERE tenant_id = $1 AND id = $2";
        let created: Option<DateTime<Utc>> = on!(&self.ctx.db, pool => sqlx::query_scalar(sql).bind(self.cast.tenant).bind(booking).fetch_optional(pool).await?);
        Ok(created.is_some_and(|c| c < due))
    }
}
