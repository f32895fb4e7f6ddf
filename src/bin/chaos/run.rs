//! One run: a fresh business (its own tenant, phone number and staff), a few customers and a
//! script drawn from the run's seed: customers book (the model repeating itself), some forget
//! and book again, some move their booking (maybe onto another's time), some cancel with a button (double clicks, a typed "yes" racing the click,
//! stale clicks later); the merchant sends a Pix charge confirmed by a button, the provider
//! fails or times out after creating it, the payment is notified several times, sometimes
//! before the charge's own response or late; every server is killed while the
//! provider holds its answer to a charge's creation, or just after a click. Meanwhile the [`crate::sabotage`] plan kills, freezes and
//! restarts servers. Then the run waits for the system to settle and checks the invariants.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use balcao::actions::{ClickId, Decision};
use balcao::store::{CatalogStore, Store, TenantStore};
use balcao::tenant::TenantSpec;
use chrono::{TimeDelta, Utc};
use serde_json::json;

use crate::db::Db;
use crate::faults::{Coverage, Fault, Faults};
use crate::graph::{FakeGraph, GraphFault, Sent};
use crate::meta::{self, Meta};
use crate::model::FakeModel;
use crate::psp::fake_asaas::{FakeAsaas, Fault as PspFault, Route, WEBHOOK_TOKEN};
use crate::rng::Rng;

/// How long a step waits for the answer it expects; a missing answer is not itself a
/// violation (the invariants decide), the run just goes on.
const STEP: Duration = Duration::from_secs(30);

pub struct Ctx {
    pub meta: Arc<Meta>,
    pub graph: FakeGraph,
    pub model: FakeModel,
    pub asaas: Arc<FakeAsaas>,
    pub store: Store,
    pub db: Db,
    pub faults: Faults,
    pub coverage: Coverage,
    pub http: reqwest::Client,
    /// One run's charge creation at a time at the shared Asaas fake, so the fault a run queues
    /// for its own create meets that create.
    pub charging: tokio::sync::Mutex<()>,
}

/// Who is who in one run.
pub struct Cast {
    pub index: u64,
    pub tenant: i64,
    pub slug: String,
    pub number: String,
    pub staff: String,
    pub customers: Vec<String>,
    pub service: i64,
    pub professional: i64,
}

impl Cast {
    /// Run `index`'s business, with one to three customers (drawn from `seed`).
    pub async fn create(ctx: &Ctx, index: u64, seed: u64) -> anyhow::Result<Self> {
        let customers = Rng::new(seed ^ 0xC057).between(1, 3);
        let slug = format!("chaos-{index}");
        let number = format!("77{index:010}");
        let staff = format!("5511970{:06}", index % 1_000_000);
        let customers = (0..customers).map(|c| format!("55118{:05}{c:03}", index % 100_000)).collect();
        let spec = TenantSpec::parse(&tenant_file(index, &slug, &number, &staff, &ctx.asaas.loopback.url))
            .context("the chaos tenant file")?;
        let outcome = ctx.store.apply_tenant(&spec, Utc::now()).await?;
        ctx.store.apply_catalog(outcome.id(), &spec.catalog).await?;
        let tenant = outcome.id().0;
        let first = |table: &str| format!("SELECT MIN(id) FROM {table} WHERE tenant_id = $1");
        let service = ctx.db.count(&first("services"), tenant).await?;
        let professional = ctx.db.count(&first("professionals"), tenant).await?;
        Ok(Self { index, tenant, slug, number, staff, customers, service, professional })
    }
}

fn tenant_file(index: u64, slug: &str, number: &str, staff: &str, asaas: &str) -> String {
    let hours =
        ["mon", "tue", "wed", "thu", "fri", "sat", "sun"].map(|d| format!("{d} = [\"08:00-20:00\"]\n")).concat();
    format!(
        "name = \"Chaos run {index}\"\nslug = \"{slug}\"\ntimezone = \"America/Sao_Paulo\"\n\
         staff = [\"+{staff}\"]\n[whatsapp]\nphone_number_id = \"{number}\"\n\
         [booking]\nmin_notice_minutes = 0\nhorizon_days = 60\nslot_step_minutes = 30\n\
         [[services]]\nname = \"Corte\"\nduration_minutes = 30\nprice = \"50.00\"\n\
         [[professionals]]\nname = \"Zé\"\nservices = [\"Corte\"]\n[professionals.hours]\n{hours}\
         [pix]\ngateway = \"asaas\"\nbase_url = \"{asaas}/v3\"\napi_key_env = \"ASAAS_API_KEY\"\n\
         webhook_secret_env = \"ASAAS_WEBHOOK_TOKEN\"\nkey = \"caixa@chaos.example\"\nkey_type = \"email\"\n\
         merchant_name = \"Chaos\"\nmerchant_city = \"Sao Paulo\"\n"
    )
}

/// Plays run `index` with `seed`, as `cast`: returns what went wrong on the way (a message Meta
/// could not get acknowledged, a notification never accepted).
pub async fn play(ctx: &Ctx, cast: &Cast, seed: u64) -> anyhow::Result<Vec<String>> {
    let mut rng = Rng::new(seed);
    // A few of the next Graph API sends fail or lose their response.
    for _ in 0..rng.between(0, 3) {
        let fault = match rng.below(3) {
            0 => GraphFault::Error(429),
            1 => GraphFault::Error(*rng.pick(&[500, 503])),
            _ => GraphFault::Lost,
        };
        ctx.faults.add(if matches!(fault, GraphFault::Lost) { Fault::GraphLostResponse } else { Fault::GraphError });
        ctx.graph.inject(&cast.number, [fault]);
    }
    let player = Player { ctx, cast, late: Default::default(), problems: Default::default() };
    // All customers and the merchant at once, each with its own draw of the seed.
    let slot = rng.below(6);
    let mut flows = Vec::new();
    for c in 0..cast.customers.len() {
        let own = if rng.chance(0.5) { slot } else { rng.below(6) };
        flows.push(futures::future::Either::Left(player.customer(c, own, Rng::new(rng.next_u64()))));
    }
    if rng.chance(0.7) {
        flows.push(futures::future::Either::Right(player.merchant(Rng::new(rng.next_u64()))));
    }
    for result in futures::future::join_all(flows).await {
        result?;
    }
    // Redeliveries "hours later": after everything else, so out of order too.
    let late = std::mem::take(&mut *player.late.lock().await);
    for body in late {
        ctx.faults.add(Fault::LateRedelivery);
        player.deliver(&body).await;
    }
    Ok(std::mem::take(&mut *player.problems.lock().unwrap_or_else(std::sync::PoisonError::into_inner)))
}

struct Player<'a> {
    ctx: &'a Ctx,
    cast: &'a Cast,
    late: tokio::sync::Mutex<Vec<serde_json::Value>>,
    problems: std::sync::Mutex<Vec<String>>,
}

impl Player<'_> {
    fn problem(&self, what: String) {
        self.problems.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(what);
    }

    /// Delivers a webhook as Meta does; one never acknowledged is a lost message.
    async fn deliver(&self, body: &serde_json::Value) {
        if !self.ctx.meta.deliver(body).await {
            let id = &body["entry"][0]["changes"][0]["value"]["messages"][0]["id"];
            self.problem(format!("webhook for message {id} never acknowledged"));
        }
    }

    /// Delivers a message from `from`, sometimes twice at once, sometimes again later.
    async fn say(&self, rng: &mut Rng, from: &str, message: serde_json::Value) {
        let body = meta::message(&self.cast.number, from, message);
        if rng.chance(0.2) {
            self.ctx.faults.add(Fault::DuplicateDelivery);
            futures::future::join(self.deliver(&body), self.deliver(&body)).await;
        } else {
            self.deliver(&body).await;
        }
        if rng.chance(0.1) {
            self.late.lock().await.push(body);
        }
    }

    fn wamid(&self, rng: &mut Rng) -> String {
        format!("wamid.chaos.{}.{:016x}", self.cast.index, rng.next_u64())
    }

    async fn text(&self, rng: &mut Rng, from: &str, body: &str) {
        let wamid = self.wamid(rng);
        self.say(rng, from, meta::text(&wamid, from, body)).await;
    }

    /// Says `body` and waits for the next message to `from`.
    async fn ask(&self, rng: &mut Rng, from: &str, body: &str) -> Option<Sent> {
        let before = self.ctx.graph.count_to(&self.cast.number, from);
        self.text(rng, from, body).await;
        self.ctx.graph.wait_for(&self.cast.number, from, before, STEP, |_| true).await
    }

    /// Clicks `id` `times` at once (a double click), maybe with a typed confirmation racing it.
    async fn click(&self, rng: &mut Rng, from: &str, id: &str, times: u64, typed: bool) {
        if times > 1 {
            self.ctx.faults.add(Fault::DoubleClick);
        }
        let mut clicks = Vec::new();
        for _ in 0..times {
            let wamid = self.wamid(rng);
            let body = meta::message(&self.cast.number, from, meta::button(&wamid, from, id));
            clicks.push(async move { self.deliver(&body).await });
        }
        let typed = typed.then(|| ClickId::parse(id).map(|c| format!("#confirm action={}", c.action))).flatten();
        let typed = async {
            if let Some(text) = typed {
                self.ctx.faults.add(Fault::TypedConfirmRace);
                let wamid = format!("wamid.chaos.{}.typed.{id}", self.cast.index);
                self.deliver(&meta::message(&self.cast.number, from, meta::text(&wamid, from, &text))).await;
            }
        };
        futures::future::join(futures::future::join_all(clicks), typed).await;
    }

    async fn customer(&self, c: usize, slot: u64, mut rng: Rng) -> anyhow::Result<()> {
        let me = self.cast.customers[c].clone();
        self.ask(&mut rng, &me, "oi").await;
        if !rng.chance(0.8) {
            return Ok(());
        }
        let (at, alt) = start(slot)?;
        let book = format!(
            "#book service={} professional={} at={at} alt={alt} copies={}",
            self.cast.service,
            self.cast.professional,
            rng.between(1, 3)
        );
        self.ask(&mut rng, &me, &book).await;
        if rng.chance(0.3) {
            self.ctx.faults.add(Fault::ModelForgets);
            self.ask(&mut rng, &me, &book).await;
        }
        if rng.chance(0.3)
            && let Some(booking) = self.booking_of(&me).await?
        {
            // A move, maybe onto another customer's time (the overlap constraint decides).
            let (to, _) = start(rng.below(6))?;
            let moving = format!("#move booking={booking} at={to} copies={}", rng.between(1, 2));
            self.ask(&mut rng, &me, &moving).await;
        }
        if !rng.chance(0.5) {
            return Ok(());
        }
        let Some(booking) = self.booking_of(&me).await? else { return Ok(()) };
        let before = self.ctx.graph.count_to(&self.cast.number, &me);
        let cancel = format!("#cancel booking={booking} copies={}", rng.between(1, 2));
        self.text(&mut rng, &me, &cancel).await;
        let offer = self.ctx.graph.wait_for(&self.cast.number, &me, before, STEP, |s| !s.buttons().is_empty()).await;
        let Some(confirm) = offer.and_then(|o| confirm_button(&o)) else { return Ok(()) };
        let before = self.ctx.graph.count_to(&self.cast.number, &me);
        let (times, typed) = (rng.between(1, 3), rng.chance(0.25));
        self.click(&mut rng, &me, &confirm, times, typed).await;
        if rng.chance(0.1) {
            // Every server, so the one that took the click is among them.
            self.ctx.faults.add(Fault::KillAfterClick);
            tokio::time::sleep(Duration::from_millis(rng.below(150))).await;
            self.ctx.meta.cluster.kill_all().await?;
        }
        self.ctx.graph.wait_for(&self.cast.number, &me, before, STEP, |_| true).await;
        if rng.chance(0.3) {
            self.ctx.faults.add(Fault::StaleClick);
            self.click(&mut rng, &me, &confirm, 1, false).await;
        }
        Ok(())
    }

    async fn merchant(&self, mut rng: Rng) -> anyhow::Result<()> {
        let staff = self.cast.staff.clone();
        let customer = self.cast.customers[0].clone();
        // The customer must have written first (a charge outside the 24-hour window is a template).
        self.ctx.graph.wait_for(&self.cast.number, &customer, 0, STEP, |_| true).await;
        let description = format!("Servico{}", self.cast.index);
        let amount = rng.between(10, 200);
        let before = self.ctx.graph.count_to(&self.cast.number, &staff);
        let copies = rng.between(1, 3);
        let charge = format!("#charge phone=+{customer} amount={amount}.00 desc={description} copies={copies}");
        self.text(&mut rng, &staff, &charge).await;
        let offer = self.ctx.graph.wait_for(&self.cast.number, &staff, before, STEP, |s| !s.buttons().is_empty()).await;
        let Some(confirm) = offer.and_then(|o| confirm_button(&o)) else { return Ok(()) };
        // Our create meets our fault: one run's charge at a time until the provider has it.
        let charging = self.ctx.charging.lock().await;
        let (hang, kill_at_call) = match rng.below(5) {
            0 => {
                self.ctx.faults.add(Fault::ProviderError);
                self.ctx.asaas.fail(Route::CreatePayment, PspFault::Respond(500, json!({ "errors": [] })));
                (false, false)
            }
            1 => {
                self.ctx.faults.add(Fault::ProviderTimeoutAfterCommit);
                self.ctx.asaas.fail(Route::CreatePayment, PspFault::ActThenHang);
                (true, false)
            }
            // The provider creates the payment and holds its answer while every server is
            // killed: the one that called dies between the provider call and its record.
            2 => {
                self.ctx.asaas.fail(Route::CreatePayment, PspFault::ActThenHang);
                (true, true)
            }
            _ => (false, false),
        };
        let times = rng.between(1, 3);
        self.click(&mut rng, &staff, &confirm, times, false).await;
        // The payment, as the provider holds it.
        let mut payment = None;
        let mut killed = false;
        for _ in 0..(STEP.as_millis() / 50) {
            payment = self.ctx.asaas.payments().into_iter().find(|p| p["description"] == description.as_str());
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
        drop(charging);
        let Some(id) = payment.and_then(|p| p["id"].as_str().map(str::to_owned)) else {
            self.problem(format!("the confirmed charge {description} never reached the provider"));
            return Ok(());
        };
        if hang {
            self.ctx.faults.add(Fault::EarlyNotification);
        }
        self.ctx.asaas.update(&id, json!({ "status": "RECEIVED" }));
        let copies = rng.between(1, 3);
        if copies > 1 {
            self.ctx.faults.add(Fault::DuplicateNotification);
        }
        if rng.chance(0.3) {
            self.ctx.faults.add(Fault::DelayedNotification);
            tokio::time::sleep(Duration::from_millis(rng.between(200, 2_000))).await;
        }
        let event = format!("evt_chaos_{}_{id}", self.cast.index);
        futures::future::join_all((0..copies).map(|_| self.notify(&event, &id))).await;
        self.ctx
            .graph
            .wait_for(&self.cast.number, &customer, 0, STEP, |s| s.text().contains("Recebemos seu pagamento"))
            .await;
        if rng.chance(0.3) {
            self.ctx.faults.add(Fault::StaleClick);
            self.click(&mut rng, &staff, &confirm, 1, false).await;
        }
        Ok(())
    }

    /// The customer's latest confirmed appointment.
    async fn booking_of(&self, wa_id: &str) -> anyhow::Result<Option<i64>> {
        let sql = format!(
            "SELECT COALESCE(MAX(a.id), 0) FROM appointments a JOIN contacts c ON c.id = a.contact_id \
             WHERE a.tenant_id = $1 AND c.wa_id = '{wa_id}' AND a.status = 'confirmed'"
        );
        Ok(Some(self.ctx.db.count(&sql, self.cast.tenant).await?).filter(|id| *id > 0))
    }

    async fn charge_recorded(&self, description: &str) -> anyhow::Result<bool> {
        let sql = format!(
            "SELECT COUNT(*) FROM charges WHERE tenant_id = $1 AND description = '{description}' \
             AND provider_ref IS NOT NULL"
        );
        Ok(self.ctx.db.count(&sql, self.cast.tenant).await? > 0)
    }

    /// Asaas's notification, to a random server, retried until it is answered 200.
    async fn notify(&self, event: &str, payment: &str) {
        let body = json!({ "id": event, "event": "PAYMENT_RECEIVED", "dateCreated": "2026-12-03 10:00:00",
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

/// Start `slot` of six: in two or three days, 10:00, 10:30 or 11:00 in São Paulo (UTC-3), in
/// UTC and with the local offset (two spellings of one instant).
fn start(slot: u64) -> anyhow::Result<(String, String)> {
    let day = Utc::now().date_naive() + TimeDelta::days(2 + (slot / 3) as i64);
    let minute = 13 * 60 + 30 * (slot % 3) as i64;
    let at = day.and_hms_opt(0, 0, 0).context("midnight")?.and_utc() + TimeDelta::minutes(minute);
    let local = at.with_timezone(&chrono::FixedOffset::west_opt(3 * 3600).context("offset")?);
    Ok((at.format("%Y-%m-%dT%H:%M:%SZ").to_string(), local.format("%Y-%m-%dT%H:%M:%S%:z").to_string()))
}

/// The Confirmar id of an offer's buttons.
fn confirm_button(offer: &Sent) -> Option<String> {
    offer.buttons().into_iter().find(|id| ClickId::parse(id).is_some_and(|c| c.decision == Decision::Confirm))
}
