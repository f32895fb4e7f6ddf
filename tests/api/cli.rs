//! The `balcao` binary: migrate and tenant apply, as an operator runs them.

use std::process::Command;

fn balcao(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_balcao"))
        .args(args)
        .current_dir(dir)
        .env("DATABASE_URL", format!("sqlite://{}", dir.join("data/balcao.db").display()))
        .env_remove("WHATSAPP_ACCESS_TOKEN")
        .env_remove("RUST_LOG")
        .output()
        .expect("run balcao")
}

#[test]
fn tenant_apply_is_idempotent_and_reports_bad_files_by_line() {
    let dir = tempfile::tempdir().unwrap();
    let example = format!("{}/tenants/example.toml", env!("CARGO_MANIFEST_DIR"));

    let migrate = balcao(dir.path(), &["migrate"]);
    assert!(migrate.status.success(), "{}", String::from_utf8_lossy(&migrate.stderr));

    let first = balcao(dir.path(), &["tenant", "apply", &example]);
    assert!(first.status.success(), "{}", String::from_utf8_lossy(&first.stderr));
    assert!(String::from_utf8_lossy(&first.stdout).contains("created tenant barbearia-do-ze"));
    let second = balcao(dir.path(), &["tenant", "apply", &example]);
    assert!(String::from_utf8_lossy(&second.stdout).contains("is unchanged"), "{second:?}");

    let bad = dir.path().join("bad.toml");
    let text = std::fs::read_to_string(&example).unwrap().replace("America/Sao_Paulo", "Brasil/Brasilia");
    std::fs::write(&bad, text).unwrap();
    let out = balcao(dir.path(), &["tenant", "apply", bad.to_str().unwrap()]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("line 9:") && stderr.contains("Brasil/Brasilia"), "{stderr}");
}

#[test]
fn invalid_configuration_is_reported_before_starting() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_balcao"))
        .arg("migrate")
        .current_dir(dir.path())
        .env("BALCAO_DEBOUNCE_MS", "soon")
        .env("WHATSAPP_ACCESS_TOKEN", "EAAG-secret-token-value")
        .env_remove("WHATSAPP_APP_SECRET")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("BALCAO_DEBOUNCE_MS") && stderr.contains("WHATSAPP_APP_SECRET is required"), "{stderr}");
    assert!(!stderr.contains("EAAG-secret-token-value"));
}

/// A failing command under `RUST_BACKTRACE=1`, as a Rust user's shell often has it.
fn failing(dir: &std::path::Path, args: &[&str], env: &[(&str, &str)]) -> String {
    let mut command = Command::new(env!("CARGO_BIN_EXE_balcao"));
    command
        .args(args)
        .current_dir(dir)
        .env("DATABASE_URL", format!("sqlite://{}", dir.join("data/balcao.db").display()))
        .env("RUST_BACKTRACE", "1")
        .env("BALCAO_ADMIN_PASSWORD", "a-long-enough-password")
        .env_remove("BALCAO_DEBUG")
        .env_remove("WHATSAPP_ACCESS_TOKEN")
        .env_remove("RUST_LOG");
    for (k, v) in env {
        command.env(k, v);
    }
    let out = command.output().expect("run balcao");
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!stderr.contains("backtrace") && !stderr.contains("Caused by"), "{stderr}");
    stderr
}

#[test]
fn errors_name_their_cause_once_with_a_hint_and_no_backtrace() {
    let dir = tempfile::tempdir().unwrap();
    // Before the first start: no tenant yet, and what to do about it.
    let stderr = failing(dir.path(), &["admin", "add", "ana@example.com", "--tenant", "barbearia-do-ze"], &[]);
    assert!(stderr.starts_with("error: no tenant \"barbearia-do-ze\""), "{stderr}");
    assert!(stderr.contains("it has none yet") && stderr.contains("balcao tenant apply"), "{stderr}");

    // An unreachable PostgreSQL: the refusal itself, said once, not "pool timed out".
    let pg = [("DATABASE_URL", "postgres://postgres@127.0.0.1:1/nothing")];
    let stderr = failing(dir.path(), &["migrate"], &pg);
    assert!(stderr.contains("failed to open the database"), "{stderr}");
    assert!(stderr.to_lowercase().contains("connection refused"), "{stderr}");
    assert!(!stderr.contains("timed out"), "{stderr}");
    assert_eq!(stderr.matches("onnection refused").count(), 1, "the cause once: {stderr}");

    // Asked for, the whole chain and where it came from.
    let mut debug = Command::new(env!("CARGO_BIN_EXE_balcao"));
    debug.arg("migrate").current_dir(dir.path()).env("DATABASE_URL", pg[0].1).env("BALCAO_DEBUG", "1");
    let out = debug.output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("Caused by"), "{out:?}");
}

#[test]
fn chat_names_a_missing_tenant_in_portuguese() {
    let dir = tempfile::tempdir().unwrap();
    // A server that is not there: said in Portuguese, with what to check.
    let stderr = failing(dir.path(), &["chat", "--tenant", "typo", "--url", "http://127.0.0.1:1"], &[]);
    assert!(stderr.contains("não consegui falar com o servidor em http://127.0.0.1:1"), "{stderr}");
    assert!(!stderr.contains("BALCAO_ADMIN_TOKEN"), "{stderr}");
}
