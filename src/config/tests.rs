use std::ops::RangeInclusive;

use super::*;

fn vars(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

#[test]
fn defaults_need_no_setup() {
    let c = Config::from_vars(&HashMap::new()).unwrap();
    assert_eq!(c.addr.to_string(), DEFAULT_ADDR);
    assert!(c.database_url.is_sqlite());
    assert!(c.whatsapp.local_mode);
    assert_eq!(c.queue.debounce, Duration::from_millis(2000));
    assert_eq!(c.queue.debounce_max, Duration::from_secs(10));
}

#[test]
fn secrets_never_show_in_debug() {
    let c = Config::from_vars(&vars(&[
        ("WHATSAPP_APP_SECRET", "app-secret-value"),
        ("WHATSAPP_ACCESS_TOKEN", "EAAG-token-value"),
        ("WHATSAPP_VERIFY_TOKEN", "verify-value"),
        ("DATABASE_URL", "postgres://balcao:hunter2@db:5432/balcao"),
        ("BALCAO_TRANSCRIPTION_URL", "http://127.0.0.1:8000"),
        ("BALCAO_TRANSCRIPTION_API_KEY", "sk-transcribe-value"),
    ]))
    .unwrap();
    let debug = format!("{c:?}");
    for secret in ["app-secret-value", "EAAG-token-value", "verify-value", "hunter2", "sk-transcribe-value"] {
        assert!(!debug.contains(secret), "{secret} leaked in {debug}");
    }
    assert!(debug.contains("postgres://balcao:[redacted]@db:5432/balcao"));
}

#[test]
fn reports_every_problem_at_once() {
    let err = Config::from_vars(&vars(&[
        ("WHATSAPP_ACCESS_TOKEN", "x"),
        ("BALCAO_DEBOUNCE_MS", "soon"),
        ("BALCAO_JOB_LEASE_SECONDS", "0"),
        ("DATABASE_URL", "mysql://x"),
    ]))
    .unwrap_err();
    let text = err.to_string();
    assert_eq!(err.0.len(), 4, "{text}");
    assert!(text.contains("WHATSAPP_APP_SECRET is required"));
    assert!(text.contains("BALCAO_DEBOUNCE_MS=\"soon\""));
}

/// Every numeric setting with its bounds.
const BOUNDED: &[(&str, RangeInclusive<u64>)] = &[
    ("BALCAO_DB_MAX_CONNECTIONS", DB_MAX_CONNECTIONS),
    ("BALCAO_JOB_LEASE_SECONDS", JOB_LEASE_SECONDS),
    ("BALCAO_DEBOUNCE_MS", DEBOUNCE_MS),
    ("BALCAO_DEBOUNCE_MAX_MS", DEBOUNCE_MAX_MS),
    ("BALCAO_WORKERS", WORKERS),
    ("BALCAO_INTAKE_BATCH_MAX", INTAKE_BATCH_MAX),
    ("BALCAO_INTAKE_BATCH_WINDOW_MS", INTAKE_BATCH_WINDOW_MS),
    ("BALCAO_INTAKE_WRITERS", INTAKE_WRITERS),
    ("BALCAO_JOB_MAX_ATTEMPTS", MAX_ATTEMPTS),
    ("BALCAO_JOB_BACKOFF_BASE_MS", BACKOFF_BASE_MS),
    ("BALCAO_JOB_BACKOFF_MAX_SECONDS", BACKOFF_MAX_SECONDS),
    ("BALCAO_JOB_RETENTION_HOURS", JOB_RETENTION_HOURS),
    ("BALCAO_POLL_INTERVAL_MS", POLL_INTERVAL_MS),
    ("BALCAO_OUTBOX_GRACE_SECONDS", OUTBOX_GRACE_SECONDS),
    ("BALCAO_OUTBOX_MAX_ATTEMPTS", MAX_ATTEMPTS),
    ("BALCAO_HTTP_TIMEOUT_SECONDS", HTTP_TIMEOUT_SECONDS),
    ("BALCAO_LEDGER_LEASE_SECONDS", LEDGER_LEASE_SECONDS),
    ("BALCAO_LEDGER_RETENTION_DAYS", LEDGER_RETENTION_DAYS),
    ("BALCAO_AGENT_MAX_STEPS", AGENT_MAX_STEPS),
    ("BALCAO_AGENT_MAX_TOKENS", AGENT_MAX_TOKENS),
    ("BALCAO_AGENT_HISTORY_TURNS", AGENT_HISTORY_TURNS),
    ("BALCAO_AGENT_HISTORY_BUDGET_CHARS", AGENT_HISTORY_BUDGET_CHARS),
    ("BALCAO_LLM_TIMEOUT_SECONDS", LLM_TIMEOUT_SECONDS),
    ("BALCAO_TRANSCRIPTION_TIMEOUT_SECONDS", HTTP_TIMEOUT_SECONDS),
    ("BALCAO_SHUTDOWN_GRACE_SECONDS", SHUTDOWN_GRACE_SECONDS),
    ("BALCAO_HANDOFF_IDLE_MINUTES", HANDOFF_IDLE_MINUTES),
];

fn range_problems(err: &ConfigError, name: &str) -> usize {
    err.0.iter().filter(|p| p.starts_with(&format!("{name}=")) && p.contains("out of range")).count()
}

#[test]
fn every_numeric_setting_is_bounded() {
    for (name, bounds) in BOUNDED {
        let mut outside = vec![bounds.end() + 1, u64::MAX];
        if *bounds.start() > 0 {
            outside.push(bounds.start() - 1);
        }
        for value in outside {
            let err = Config::from_vars(&vars(&[(name, &value.to_string())]))
                .expect_err(&format!("{name}={value} was accepted"));
            assert_eq!(range_problems(&err, name), 1, "{name}={value}: {err}");
        }
        for value in [*bounds.start(), *bounds.end()] {
            // A bound may contradict another setting's default; only its own range counts.
            if let Err(err) = Config::from_vars(&vars(&[(name, &value.to_string())])) {
                assert_eq!(range_problems(&err, name), 0, "{name}={value}: {err}");
            }
        }
    }
}

#[test]
fn the_largest_values_convert_to_timestamps() {
    // The longest durations end up added to "now" as chrono deltas in background tasks.
    let c = Config::from_vars(&vars(&[
        ("BALCAO_JOB_RETENTION_HOURS", &JOB_RETENTION_HOURS.end().to_string()),
        ("BALCAO_LEDGER_RETENTION_DAYS", &LEDGER_RETENTION_DAYS.end().to_string()),
        ("BALCAO_LEDGER_LEASE_SECONDS", &LEDGER_LEASE_SECONDS.end().to_string()),
        ("BALCAO_JOB_LEASE_SECONDS", &JOB_LEASE_SECONDS.end().to_string()),
        ("BALCAO_OUTBOX_GRACE_SECONDS", &OUTBOX_GRACE_SECONDS.end().to_string()),
        ("BALCAO_JOB_BACKOFF_MAX_SECONDS", &BACKOFF_MAX_SECONDS.end().to_string()),
        ("BALCAO_DEBOUNCE_MAX_MS", &DEBOUNCE_MAX_MS.end().to_string()),
    ]))
    .unwrap();
    let now = chrono::Utc::now();
    for d in [c.queue.retention, c.ledger.retention, c.ledger.lease, c.queue.lease, c.outbox.grace] {
        let delta = chrono::TimeDelta::from_std(d).unwrap();
        assert!(now.checked_add_signed(delta).is_some() && now.checked_sub_signed(delta).is_some());
    }
    assert!(c.queue.lease / 3 > Duration::ZERO && c.ledger.lease / 3 > Duration::ZERO);
}

#[test]
fn contradicting_settings_are_refused_together() {
    let err = Config::from_vars(&vars(&[
        ("BALCAO_DEBOUNCE_MS", "5000"),
        ("BALCAO_DEBOUNCE_MAX_MS", "1000"),
        ("BALCAO_JOB_BACKOFF_BASE_MS", "600000"),
        ("BALCAO_JOB_BACKOFF_MAX_SECONDS", "300"),
        ("BALCAO_OUTBOX_GRACE_SECONDS", "15"),
        ("BALCAO_HTTP_TIMEOUT_SECONDS", "15"),
        ("BALCAO_JOB_LEASE_SECONDS", "300"),
        ("BALCAO_LEDGER_LEASE_SECONDS", "120"),
        ("BALCAO_WORKERS", "0"),
    ]))
    .unwrap_err();
    let text = err.to_string();
    assert_eq!(err.0.len(), 5, "{text}");
    for expected in [
        "BALCAO_DEBOUNCE_MAX_MS must not be below BALCAO_DEBOUNCE_MS",
        "BALCAO_JOB_BACKOFF_MAX_SECONDS must not be below BALCAO_JOB_BACKOFF_BASE_MS",
        "BALCAO_OUTBOX_GRACE_SECONDS must be longer than BALCAO_HTTP_TIMEOUT_SECONDS",
        "BALCAO_LEDGER_LEASE_SECONDS must not be below BALCAO_JOB_LEASE_SECONDS",
        "BALCAO_WORKERS=0 is out of range",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in {text}");
    }
}

#[test]
fn local_mode_public_is_an_explicit_flag() {
    assert!(!Config::from_vars(&HashMap::new()).unwrap().whatsapp.local_mode_public);
    let on = Config::from_vars(&vars(&[("BALCAO_LOCAL_MODE_PUBLIC", "1")])).unwrap();
    assert!(on.whatsapp.local_mode_public);
    let err = Config::from_vars(&vars(&[("BALCAO_LOCAL_MODE_PUBLIC", "yes please")])).unwrap_err();
    assert!(err.to_string().contains("BALCAO_LOCAL_MODE_PUBLIC"), "{err}");
}
