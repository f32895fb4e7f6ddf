//! One run: a fresh business (its own tenant, phone number, staff and Asaas account), a few
//! customers and a script drawn from the run's seed: each customer's part is in
//! [`customer`] (bookings, moves, cancellations by button, deposits, reminders answered), the
//! merchant's in [`merchant`] (a Pix charge confirmed by a button and paid). Meanwhile the
//! [`crate::sabotage`] plan kills, freezes and restarts servers. Then the run waits for the
//! system to settle and checks the invariants.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use balcao::domain::{ClickId, Decision};
use balcao::store::{CatalogStore, Store, TenantStore};
use balcao::tenant::TenantSpec;
use chrono::{DateTime, Datelike, DurationRound, TimeDelta, Utc, Weekday};

use crate::db::Db;
use crate::faults::{Coverage, Fault, Faults};
use crate::graph::{FakeGraph, GraphFault, Sent};
use crate::meta::{self, Meta};
use crate::model::FakeModel;
use crate::psp::fake_asaas::FakeAsaas;
use crate::rng::Rng;

/// How long a step waits for the answer it expects; a missing answer is not itself a
/// violation (the invariants decide), the run just goes on.
const STEP: Duration = Duration::from_secs(30);
/// The share of runs in which a customer is erased mid-conversation.
const ERASURE_SHARE: f64 = 0.4;
/// Every customer's CPF, as they type it: Asaas needs one for each charge.
const CPF: &str = "529.982.247-25";

pub struct Ctx {
    pub meta: Arc<Meta>,
    pub graph: FakeGraph,
    pub model: FakeModel,
    pub store: Store,
    pub db: Db,
    pub faults: Faults,
    pub coverage: Coverage,
    pub http: reqwest::Client,
    /// The share of its full probability with which a run draws each process fault (1 up to
    /// 12 runs in flight): a kill hits every run in flight.
    pub share: f64,
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
    /// A service booked on hold until its Pix deposit is paid.
    pub deposit_service: i64,
    pub professional: i64,
    /// A start whose reminder comes due a minute or two into the run: the professional's hours
    /// on its day open at that minute, so it is a slot. `None` late in the local evening.
    pub reminder_at: Option<DateTime<Utc>>,
    /// A customer the merchant erases mid-conversation, in some runs (see `erasure`).
    pub erasee: Option<String>,
    /// The business's own Asaas account: the faults a run queues meet its own requests, and
    /// every run's payments have the same ids (`pay_000000000001`), which tenant scoping keeps
    /// apart.
    pub asaas: FakeAsaas,
}

impl Cast {
    /// Run `index`'s business, with one to three customers (drawn from `seed`).
    pub async fn create(ctx: &Ctx, index: u64, seed: u64) -> anyhow::Result<Self> {
        let customers = Rng::new(seed ^ 0xC057).between(1, 3);
        let slug = format!("chaos-{index}");
        let number = format!("77{index:010}");
        let staff = format!("5511970{:06}", index % 1_000_000);
        let customers = (0..customers).map(|c| format!("55118{:05}{c:03}", index % 100_000)).collect();
        let erasee = Rng::new(seed ^ 0xE4A5).chance(ERASURE_SHARE).then(|| format!("55118{:05}009", index % 100_000));
        let asaas = FakeAsaas::start().await;
        let reminder_at = reminder_start(Utc::now())?;
        let hours = hours(reminder_at)?;
        let spec = TenantSpec::parse(&tenant_file(index, &slug, &number, &staff, &hours, &asaas.loopback.url))
            .context("the chaos tenant file")?;
        let outcome = ctx.store.apply_tenant(&spec, Utc::now()).await?;
        ctx.store.apply_catalog(outcome.id(), &spec.catalog).await?;
        let tenant = outcome.id().0;
        let id = |f: &str, table: &str| format!("SELECT {f}(id) FROM {table} WHERE tenant_id = $1");
        let service = ctx.db.count(&id("MIN", "services"), tenant).await?;
        let deposit_service = ctx.db.count(&id("MAX", "services"), tenant).await?;
        let professional = ctx.db.count(&id("MIN", "professionals"), tenant).await?;
        Ok(Self {
            index,
            tenant,
            slug,
            number,
            staff,
            customers,
            service,
            deposit_service,
            professional,
            reminder_at,
            erasee,
            asaas,
        })
    }
}

/// A start on the next minute but one, [`REMINDER_HOURS`] ahead, unless it is too late in the
/// local day for a 30-minute service.
pub fn reminder_start(now: DateTime<Utc>) -> anyhow::Result<Option<DateTime<Utc>>> {
    let soon = (now + TimeDelta::seconds(30)).duration_round_up(TimeDelta::minutes(1))?;
    let at = soon + TimeDelta::hours(REMINDER_HOURS);
    Ok((local(at)?.time() <= chrono::NaiveTime::from_hms_opt(23, 25, 0).context("a time")?).then_some(at))
}

/// The professional's hours: all day on a 30-minute grid, except the reminder's day, which
/// opens at the reminder's start.
fn hours(reminder_at: Option<DateTime<Utc>>) -> anyhow::Result<String> {
    let opening = reminder_at.map(local).transpose()?;
    let days = [Weekday::Mon, Weekday::Tue, Weekday::Wed, Weekday::Thu, Weekday::Fri, Weekday::Sat, Weekday::Sun];
    Ok(days
        .map(|day| {
            let open = match opening {
                Some(at) if at.weekday() == day => at.format("%H:%M").to_string(),
                _ => "00:00".to_owned(),
            };
            format!("{} = [\"{open}-23:55\"]\n", day.to_string().to_lowercase())
        })
        .concat())
}

/// Reminders [`REMINDER_HOURS`] before; a second service that asks for a deposit.
fn tenant_file(index: u64, slug: &str, number: &str, staff: &str, hours: &str, asaas: &str) -> String {
    format!(
        "name = \"Chaos run {index}\"\nslug = \"{slug}\"\ntimezone = \"America/Sao_Paulo\"\n\
         staff = [\"+{staff}\"]\n[whatsapp]\nphone_number_id = \"{number}\"\n\
         [booking]\nmin_notice_minutes = 0\nhorizon_days = 60\nslot_step_minutes = 30\n\
         [reminders]\nhours_before = {REMINDER_HOURS}\n\
         [[services]]\nname = \"Corte\"\nduration_minutes = 30\nprice = \"50.00\"\n\
         [[services]]\nname = \"Coloração\"\nduration_minutes = 30\nprice = \"100.00\"\ndeposit = \"20.00\"\n\
         [[professionals]]\nname = \"Zé\"\nservices = [\"Corte\", \"Coloração\"]\n[professionals.hours]\n{hours}\
         [pix]\ngateway = \"asaas\"\nbase_url = \"{asaas}/v3\"\napi_key_env = \"ASAAS_API_KEY\"\n\
         webhook_secret_env = \"ASAAS_WEBHOOK_TOKEN\"\nkey = \"caixa@chaos.example\"\nkey_type = \"email\"\n\
         merchant_name = \"Chaos\"\nmerchant_city = \"Sao Paulo\"\ntimeout_seconds = 5\n\
         lookup_margin_seconds = 1\n"
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
    let erasure = async {
        match &cast.erasee {
            Some(me) => player.erased(me, Rng::new(seed ^ 0xE4A5E)).await,
            None => Ok(()),
        }
    };
    let (results, erased) = futures::future::join(futures::future::join_all(flows), erasure).await;
    for result in results {
        result?;
    }
    erased?;
    // Redeliveries "hours later": after everything else, so out of order too.
    let late = std::mem::take(&mut *player.late.lock().await);
    for body in late {
        ctx.faults.add(Fault::LateRedelivery);
        player.deliver(&body).await;
    }
    Ok(std::mem::take(&mut *player.problems.lock().unwrap_or_else(std::sync::PoisonError::into_inner)))
}

mod customer;
mod erasure;
mod merchant;

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
}

/// How long before its start a booking's reminder is due (the chaos tenant's setting): far
/// enough that the runs' ordinary bookings, three or four days ahead, never get one.
pub const REMINDER_HOURS: i64 = 48;

/// Start `slot` of six: in three or four days, 10:00, 10:30 or 11:00 in São Paulo (UTC-3).
fn start(slot: u64) -> anyhow::Result<DateTime<Utc>> {
    let day = Utc::now().date_naive() + TimeDelta::days(3 + (slot / 3) as i64);
    let minute = 13 * 60 + 30 * (slot % 3) as i64;
    Ok(day.and_hms_opt(0, 0, 0).context("midnight")?.and_utc() + TimeDelta::minutes(minute))
}

/// `at` in São Paulo (UTC-3, no daylight saving time since 2019).
fn local(at: DateTime<Utc>) -> anyhow::Result<DateTime<chrono::FixedOffset>> {
    Ok(at.with_timezone(&chrono::FixedOffset::west_opt(3 * 3600).context("offset")?))
}

/// `at` in UTC and with the local offset: two spellings of one instant.
fn spell(at: DateTime<Utc>) -> anyhow::Result<(String, String)> {
    Ok((at.format("%Y-%m-%dT%H:%M:%SZ").to_string(), local(at)?.format("%Y-%m-%dT%H:%M:%S%:z").to_string()))
}

/// The Confirmar id of an offer's buttons.
fn confirm_button(offer: &Sent) -> Option<String> {
    offer.buttons().into_iter().find(|id| ClickId::parse(id).is_some_and(|c| c.decision == Decision::Confirm))
}
