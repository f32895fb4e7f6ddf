//! A tenant with a catalog, customers with conversations, and an executor: the ground the
//! executor and booking tests stand on.

use std::sync::Arc;
use std::time::Duration;

use balcao::actions::ClickHandler;
use balcao::booking::Appointment;
use balcao::domain::{Cents, ContactId, ConversationId, LedgerKey};
use balcao::jobs::Replier;
use balcao::ledger::{CallContext, Executor, Outcome, Tool};
use balcao::store::{BookingError, BookingStore, CatalogStore, InboundStore, NewAppointment, Store, TenantStore};
use balcao::tenant::{Tenant, TenantSpec};
use chrono::{DateTime, TimeZone, Utc};
use serde_json::Value;

use crate::support::common::TestDb;
use crate::support::queue::{record, timing};

pub const LEASE: Duration = Duration::from_secs(120);
/// The staff number of [`Scenario::with_merchant`] (a `wa_id`).
pub const STAFF: &str = "5511988887777";

/// 14:00 in São Paulo on a weekday at least two days ahead: inside Zé's hours and the horizon.
pub fn next_weekday_at_14h() -> String {
    use chrono::{Datelike, TimeDelta, Weekday};
    let tz = chrono_tz::America::Sao_Paulo;
    let mut day = Utc::now().with_timezone(&tz).date_naive() + TimeDelta::days(2);
    while matches!(day.weekday(), Weekday::Sat | Weekday::Sun) {
        day += TimeDelta::days(1);
    }
    format!("{}T14:00:00-03:00", day.format("%Y-%m-%d"))
}

/// [`merchant_file`] on Asaas, at `fake`.
pub fn asaas_file(fake: &crate::support::fake_asaas::FakeAsaas) -> String {
    merchant_file().replace(
        "[pix]\n",
        &format!(
            "[pix]\ngateway = \"asaas\"\nbase_url = \"{}/v3\"\napi_key_env = \"ASAAS_API_KEY\"\n\
             webhook_secret_env = \"ASAAS_WEBHOOK_TOKEN\"\n",
            fake.loopback.url
        ),
    )
}

/// A server whose Pix secrets are [`asaas_secrets`], in local mode.
pub async fn app_on_asaas(db: &TestDb) -> crate::support::common::TestApp {
    let mut config = crate::support::common::local_test_config("http://127.0.0.1:9", &[]);
    config.pix_secrets = balcao::config::PixSecrets(asaas_secrets());
    crate::support::common::TestApp::spawn(db, config).await
}

/// A replier that sends nothing: messages stay in the outbox for the test to read.
pub fn local_replier(db: &TestDb) -> Replier {
    Replier::new(db.store.clone(), None, true, Arc::new(tokio::sync::Notify::new()))
}

/// The secrets [`asaas_file`] names.
pub fn asaas_secrets() -> Arc<balcao::pix::MapSecrets> {
    use crate::support::fake_asaas::{API_KEY, WEBHOOK_TOKEN};
    Arc::new(balcao::pix::MapSecrets(std::collections::HashMap::from([
        ("ASAAS_API_KEY".to_owned(), API_KEY.to_owned()),
        ("ASAAS_WEBHOOK_TOKEN".to_owned(), WEBHOOK_TOKEN.to_owned()),
    ])))
}

/// [`catalog_file`] with staff (`STAFF`) and the sandbox Pix gateway.
pub fn merchant_file() -> String {
    catalog_file("barbearia", crate::support::common::PHONE_NUMBER_ID, "America/Sao_Paulo").replacen(
        "[whatsapp]",
        &format!("staff = [\"+{STAFF}\"]\n[whatsapp]"),
        1,
    ) + "[pix]\nkey = \"barbearia@example.com\"\nkey_type = \"email\"\n\
           merchant_name = \"Barbearia do Zé\"\nmerchant_city = \"São Paulo\"\n"
}

pub fn catalog_file(slug: &str, phone_number_id: &str, timezone: &str) -> String {
    format!(
        r#"
name = "Barbearia do Zé"
slug = "{slug}"
timezone = "{timezone}"
[whatsapp]
phone_number_id = "{phone_number_id}"
[booking]
min_notice_minutes = 60
horizon_days = 30
slot_step_minutes = 30
[[services]]
name = "Corte masculino"
duration_minutes = 30
price = "50.00"
buffer_minutes = 10
[[services]]
name = "Barba"
duration_minutes = 20
price = "35,00"
[[professionals]]
name = "Zé"
services = ["Corte masculino", "Barba"]
[professionals.hours]
mon = ["09:00-12:00", "13:00-18:00"]
tue = ["09:00-12:00", "13:00-18:00"]
wed = ["09:00-12:00", "13:00-18:00"]
thu = ["09:00-12:00", "13:00-18:00"]
fri = ["09:00-12:00", "13:00-18:00"]
[[professionals]]
name = "Rafa"
services = ["Corte masculino"]
[professionals.hours]
wed = ["10:00-16:00"]
"#
    )
}

/// Tuesday 2026-03-10, 09:00 in São Paulo: the clock of every scenario.
pub fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 3, 10, 12, 0, 0).unwrap()
}

pub struct Customer {
    pub contact: ContactId,
    pub conversation: ConversationId,
}

pub struct Scenario {
    pub tenant: Tenant,
    pub executor: Executor,
    pub tools: Vec<Arc<dyn Tool>>,
    pub corte: i64,
    pub barba: i64,
    pub ze: i64,
    pub rafa: i64,
}

impl Scenario {
    pub async fn new(db: &TestDb) -> Self {
        Self::in_zone(db, "America/Sao_Paulo").await
    }

    pub async fn in_zone(db: &TestDb, timezone: &str) -> Self {
        Self::from_file(db, &catalog_file("barbearia", crate::support::common::PHONE_NUMBER_ID, timezone)).await
    }

    /// The catalog tenant with staff (`STAFF`) and the sandbox Pix gateway.
    pub async fn with_merchant(db: &TestDb) -> Self {
        Self::from_file(db, &merchant_file()).await
    }

    pub async fn from_file(db: &TestDb, file: &str) -> Self {
        let spec = TenantSpec::parse(file).unwrap();
        let outcome = db.store.apply_tenant(&spec, Utc::now()).await.unwrap();
        db.store.apply_catalog(outcome.id(), &spec.catalog).await.unwrap();
        let tenant = db.store.tenant(outcome.id()).await.unwrap().unwrap();
        let (services, professionals) = db.store.catalog(tenant.id).await.unwrap();
        let id_of = |name: &str| services.iter().find(|s| s.name == name).map(|s| s.id).unwrap();
        let pro = |name: &str| professionals.iter().find(|p| p.name == name).map(|p| p.id).unwrap();
        // Local: the scenario sends nothing; messages stay in the outbox.
        let replier = local_replier(db);
        let clicks =
            Arc::new(ClickHandler::new(db.store.clone(), replier, crate::support::common::sandbox_gateways(), LEASE));
        let mut tools = balcao::agent::tools::booking_tools(&db.store, &clicks.proposer, &clicks);
        tools.extend(
            balcao::agent::tools::merchant_tools(&db.store, &clicks.proposer, &clicks)
                .into_iter()
                .filter(|t| t.spec().name != "confirm_action"),
        );
        tools.push(Arc::new(balcao::agent::tools::ProposeBooking { proposer: clicks.proposer.clone() }));
        Self {
            executor: Executor::new(db.store.clone(), LEASE),
            tools,
            corte: id_of("Corte masculino"),
            barba: id_of("Barba"),
            ze: pro("Zé"),
            rafa: pro("Rafa"),
            tenant,
        }
    }

    pub async fn customer(&self, db: &TestDb, phone: &str) -> Customer {
        let (conversation, _) = record(
            &db.store,
            &self.tenant,
            &format!("wamid.{phone}.{}", uuid::Uuid::new_v4()),
            phone,
            &timing(0, 0, 5),
            Utc::now(),
        )
        .await;
        let contact = db.store.conversation_contact(self.tenant.id, conversation).await.unwrap().contact_id;
        Customer { contact, conversation }
    }

    /// A corte for `contact` with `professional` over `slot`, under the ledger key `key`, written
    /// straight through the store (no tool, no executor) at R$ 50,00.
    pub async fn insert_corte(
        &self,
        store: &Store,
        contact: ContactId,
        professional: i64,
        (starts_at, ends_at): (DateTime<Utc>, DateTime<Utc>),
        key: &str,
        allow_customer_overlap: bool,
    ) -> Result<Appointment, BookingError> {
        let key = LedgerKey::from_stored(key.to_owned());
        let new = NewAppointment {
            tenant: self.tenant.id,
            contact,
            service_id: self.corte,
            professional_id: professional,
            starts_at,
            ends_at,
            price: Cents(5000),
            key: &key,
            allow_customer_overlap,
            hold: None,
        };
        store.insert_appointment(&new, None, now()).await
    }

    pub fn tool(&self, name: &str) -> Arc<dyn Tool> {
        self.tools.iter().find(|t| t.spec().name == name).cloned().unwrap_or_else(|| panic!("no tool {name}"))
    }

    pub fn ctx<'a>(&'a self, customer: &Customer, trigger: Option<&'a str>, at: DateTime<Utc>) -> CallContext<'a> {
        CallContext {
            trigger_message_id: trigger,
            tool_use_id: Some("toolu_test"),
            ..CallContext::outside_turn(&self.tenant, customer.contact, customer.conversation, at)
        }
    }

    pub async fn call(&self, customer: &Customer, tool: &str, input: Value) -> Outcome {
        self.call_at(customer, tool, input, now()).await
    }

    /// Cancels booking `id` as a customer does now: `cancel_booking` proposes, a typed
    /// confirmation (`confirm_action`) confirms; returns what `confirm_action` answered.
    pub async fn cancel(&self, customer: &Customer, id: &Value) -> Value {
        let proposal = match self.call(customer, "cancel_booking", serde_json::json!({ "booking_id": id })).await {
            Outcome::Executed(v) | Outcome::AlreadyDone(v) => v,
            other => panic!("cancel_booking did not propose: {other:?}"),
        };
        assert_eq!(proposal["status"], "awaiting_confirmation", "{proposal}");
        // A later message confirms it (the proposing one cannot).
        let input = serde_json::json!({ "action_id": proposal["action_id"] });
        let ctx = self.ctx(customer, Some("wamid.confirm"), now());
        match self.executor.execute(self.tool("confirm_action").as_ref(), &ctx, &input).await.unwrap() {
            Outcome::Executed(v) | Outcome::AlreadyDone(v) => v,
            other => panic!("confirm_action failed: {other:?}"),
        }
    }

    pub async fn call_at(&self, customer: &Customer, tool: &str, input: Value, at: DateTime<Utc>) -> Outcome {
        let ctx = self.ctx(customer, Some("wamid.trigger"), at);
        self.executor.execute(self.tool(tool).as_ref(), &ctx, &input).await.unwrap()
    }
}

/// The value of a call that ran, or a failed test saying what it did instead.
pub fn executed(o: Outcome) -> Value {
    match o {
        Outcome::Executed(v) => v,
        other => panic!("expected executed, got {other:?}"),
    }
}
