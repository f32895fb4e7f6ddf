//! The merchant's part of a run: a Pix charge proposed and confirmed by a button, while the
//! provider fails, or creates the payment and holds its answer (every server killed meanwhile,
//! in some runs); then the payment, notified several times, sometimes early or late; then, in
//! most runs, its refund (in full or in part) confirmed by a button while the provider fails or
//! loses its answer, settled at once or later by its notification or the poll.

use std::time::Duration;

use serde_json::json;

use super::{CPF, Player, STEP, confirm_button};
use crate::faults::Fault;
use crate::psp::fake_asaas::{Fault as PspFault, Route, WEBHOOK_TOKEN};
use crate::rng::Rng;

/// How long a confirmed charge may take to reach the provider. At 150 runs in flight the
/// campaign kills a process every few seconds, each kill ends the attempt that holds the click
/// (its lease runs out, then a restart), and an attempt after one that died mid-call waits out
/// the provider's timeout before its lookup: a click lived through four kills and a 500 and
/// reached Asaas after 40 s (SQLite, seed 20269072). Past this bound the click's job is dead or
/// stuck, which is a violation.
const REACH_PROVIDER: Duration = Duration::from_secs(120);

impl Player<'_> {
    pub(super) async fn merchant(&self, mut rng: Rng) -> anyhow::Result<()> {
        let staff = self.cast.staff.clone();
        let customer = self.cast.customers[0].clone();
        // The customer must have written first (a charge outside the 24-hour window is a template).
        self.ctx.graph.wait_for(&self.cast.number, &customer, 0, STEP, |_| true).await;
        let description = format!("Servico{}", self.cast.index);
        let amount = rng.between(10, 200);
        let before = self.ctx.graph.count_to(&self.cast.number, &staff);
        let copies = rng.between(1, 3);
        // Asaas needs the payer's CPF: the merchant gives it with the charge.
        let charge =
            format!("#charge phone=+{customer} amount={amount}.00 desc={description} doc={CPF} copies={copies}");
        self.text(&mut rng, &staff, &charge).await;
        let offer = self.ctx.graph.wait_for(&self.cast.number, &staff, before, STEP, |s| !s.buttons().is_empty()).await;
        let Some(confirm) = offer.and_then(|o| confirm_button(&o)) else { return Ok(()) };
        let (hang, kill_at_call) = match rng.below(5) {
            0 => {
                self.ctx.faults.add(Fault::ProviderError);
                self.cast.asaas.fail(Route::CreatePayment, PspFault::Respond(500, json!({ "errors": [] })));
                (false, false)
            }
            1 => {
                self.ctx.faults.add(Fault::ProviderTimeoutAfterCommit);
                self.cast.asaas.fail(Route::CreatePayment, PspFault::ActThenHang);
                (true, false)
            }
            // The provider creates the payment and holds its answer while every server is
            // killed: the one that called dies between the provider call and its record.
            2 => {
                self.cast.asaas.fail(Route::CreatePayment, PspFault::ActThenHang);
                let kill = rng.chance(self.ctx.share);
                if !kill {
                    self.ctx.faults.add(Fault::ProviderTimeoutAfterCommit);
                }
                (true, kill)
            }
            _ => (false, false),
        };
        let times = rng.between(1, 3);
        self.click(&mut rng, &staff, &confirm, times, false).await;
        // The payment, as the provider holds it.
        let mut payment = None;
        let mut killed = false;
        for _ in 0..(REACH_PROVIDER.as_millis() / 50) {
            payment = self.cast.asaas.payments().into_iter().find(|p| p["description"] == description.as_str());
            if payment.is_some() && kill_at_call && !killed {
                self.ctx.faults.add(Fault::KillAtProviderCall);
                self.ctx.meta.cluster.kill_all().await?;
                killed = true;
            }
            if payment.is_some() && (hang || self.charge_recorded(&description).await?) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let Some(id) = payment.and_then(|p| p["id"].as_str().map(str::to_owned)) else {
            self.problem(format!("the confirmed charge {description} never reached the provider"));
            return Ok(());
        };
        if hang {
            self.ctx.faults.add(Fault::EarlyNotification);
        }
        self.pay(&mut rng, &id).await;
        self.ctx
            .graph
            .wait_for(&self.cast.number, &customer, 0, STEP, |s| s.text().contains("Recebemos seu pagamento"))
            .await;
        if rng.chance(0.3) {
            self.ctx.faults.add(Fault::StaleClick);
            self.click(&mut rng, &staff, &confirm, 1, false).await;
        }
        if rng.chance(0.6) {
            self.refund(&mut rng, &description, &id).await?;
        }
        Ok(())
    }

    /// The merchant gives payment `payment` (charge `description`) back, in full or in part.
    async fn refund(&self, rng: &mut Rng, description: &str, payment: &str) -> anyhow::Result<()> {
        let staff = self.cast.staff.clone();
        let sql = format!(
            "SELECT COALESCE(MIN(id), 0) FROM charges WHERE tenant_id = $1 AND description = '{description}' \
             AND status = 'paid'"
        );
        let charge = self.ctx.db.count(&sql, self.cast.tenant).await?;
        let value = self.cast.asaas.payments().iter().find(|p| p["id"] == payment).and_then(|p| p["value"].as_f64());
        let (Some(value), true) = (value, charge > 0) else { return Ok(()) };
        let paid = (value * 100.0).round() as u64;
        let cents = if rng.chance(0.5) { paid } else { rng.between(1, paid - 1) };
        match rng.below(4) {
            0 => {
                self.ctx.faults.add(Fault::RefundError);
                self.cast.asaas.fail(Route::RefundPayment, PspFault::Respond(500, json!({ "errors": [] })));
            }
            1 => {
                self.ctx.faults.add(Fault::RefundLostAnswer);
                self.cast.asaas.fail(Route::RefundPayment, PspFault::ActThenHang);
            }
            _ => {}
        }
        let later = rng.chance(0.5);
        if !later {
            self.cast.asaas.refunds_done_at_once();
        }
        let before = self.ctx.graph.count_to(&self.cast.number, &staff);
        let copies = rng.between(1, 2);
        let command = format!("#refund charge={charge} amount={}.{:02} copies={copies}", cents / 100, cents % 100);
        self.text(rng, &staff, &command).await;
        let is_offer = |s: &crate::graph::Sent| !s.buttons().is_empty() && s.text().contains("Devolver");
        let offer = self.ctx.graph.wait_for(&self.cast.number, &staff, before, STEP, is_offer).await;
        let Some(confirm) = offer.and_then(|o| confirm_button(&o)) else { return Ok(()) };
        let times = rng.between(1, 3);
        self.click(rng, &staff, &confirm, times, false).await;
        let mut made = false;
        for _ in 0..(REACH_PROVIDER.as_millis() / 50) {
            if !self.cast.asaas.refunds_of(payment).is_empty() {
                made = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        if !made {
            self.problem(format!("the confirmed refund of {description} never reached the provider"));
            return Ok(());
        }
        if later {
            // Asaas finishes it a moment later; its notification comes, or the poll sees it.
            self.ctx.faults.add(Fault::RefundSettledLater);
            tokio::time::sleep(Duration::from_millis(rng.between(100, 1_500))).await;
            self.cast.asaas.settle_refunds(payment, "DONE");
            if rng.chance(0.6) {
                let event = format!("evt_chaos_refund_{}_{payment}", self.cast.index);
                let copies = rng.between(1, 2);
                futures::future::join_all((0..copies).map(|_| self.notify(&event, "PAYMENT_REFUNDED", payment))).await;
            }
        }
        if rng.chance(0.3) {
            self.ctx.faults.add(Fault::StaleClick);
            self.click(rng, &staff, &confirm, 1, false).await;
        }
        Ok(())
    }

    async fn charge_recorded(&self, description: &str) -> anyhow::Result<bool> {
        let sql = format!(
            "SELECT COUNT(*) FROM charges WHERE tenant_id = $1 AND description = '{description}' \
             AND provider_ref IS NOT NULL"
        );
        Ok(self.ctx.db.count(&sql, self.cast.tenant).await? > 0)
    }

    /// The customer pays payment `id` at the provider, which notifies us once or several times
    /// at once, sometimes after a delay.
    pub(super) async fn pay(&self, rng: &mut Rng, id: &str) {
        // A charge withdrawn meanwhile (its hold cancelled or expired) can no longer be paid.
        if !self.cast.asaas.receive(id) {
            self.ctx.faults.add(Fault::PaidTooLate);
            return;
        }
        let copies = rng.between(1, 3);
        if copies > 1 {
            self.ctx.faults.add(Fault::DuplicateNotification);
        }
        if rng.chance(0.3) {
            self.ctx.faults.add(Fault::DelayedNotification);
            tokio::time::sleep(Duration::from_millis(rng.between(200, 2_000))).await;
        }
        let event = format!("evt_chaos_{}_{id}", self.cast.index);
        futures::future::join_all((0..copies).map(|_| self.notify(&event, "PAYMENT_RECEIVED", id))).await;
    }

    /// Asaas's notification, to a random server, retried until it is answered 200.
    async fn notify(&self, event: &str, kind: &str, payment: &str) {
        let body = json!({ "id": event, "event": kind, "dateCreated": "2026-12-03 10:00:00",
                           "payment": { "object": "payment", "id": payment } });
        for _ in 0..300 {
            let url = self.ctx.meta.random_url();
            let sent = self
                .ctx
                .http
                .post(format!("{url}/webhooks/pix/{}/asaas", self.cast.slug))
                .header("asaas-access-token", WEBHOOK_TOKEN)
                .json(&body)
                .send()
                .await;
            if sent.is_ok_and(|r| r.status() == 200) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        self.problem(format!("payment notification {event} never acknowledged"));
    }
}
