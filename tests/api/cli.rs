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
