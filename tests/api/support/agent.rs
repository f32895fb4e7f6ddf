//! The model agent's set-up: a config pointing at the fake model, and a slot it can book.

use crate::support::common::test_config;
use crate::support::fake_model::FakeModel;
use chrono::{Datelike, TimeDelta, Utc, Weekday};

/// A weekday at least two days ahead, 14:00 in São Paulo (Zé works then).
pub fn slot() -> String {
    let mut day = (Utc::now() + TimeDelta::days(2)).date_naive();
    while matches!(day.weekday(), Weekday::Sat | Weekday::Sun) {
        day = day.succ_opt().unwrap();
    }
    format!("{day}T14:00:00-03:00")
}

/// The app answering with the fake model; replies stay local: this is about the turn.
pub fn agent_config(fake: &FakeModel, extra: &[(&str, &str)]) -> balcao::config::Config {
    let mut vars =
        vec![("AGENT", "anthropic"), ("ANTHROPIC_API_KEY", "sk-test"), ("ANTHROPIC_BASE_URL", fake.url.as_str())];
    vars.extend_from_slice(extra);
    let mut config = test_config("http://127.0.0.1:9", &vars);
    config.whatsapp.access_token = None;
    config
}
