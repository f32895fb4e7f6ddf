//! The chaos campaign as a test: its binary (`src/bin/chaos`) against real server processes,
//! with every fault kind in play. Three servers share one PostgreSQL (each webhook to a random
//! one: concurrent duplicates spread over processes, processes killed mid-turn and taken over,
//! rolling restarts); SQLite runs one. A fixed seed, so a failure here replays by its command.

use std::process::Command;

fn campaign(args: &[&str]) {
    let output = Command::new(env!("CARGO_BIN_EXE_chaos"))
        .args(["--runs", "12", "--parallel", "6", "--seed", "1203"])
        .args(args)
        .output()
        .expect("run the chaos binary");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the campaign found violations:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("| runs with a violation | 0 |"), "{stdout}");
}

#[test]
fn one_process_on_sqlite_keeps_every_invariant() {
    campaign(&["--db", "sqlite"]);
}

#[test]
fn three_processes_on_one_postgres_keep_every_invariant() {
    let Ok(url) = std::env::var("BALCAO_TEST_POSTGRES_URL") else {
        assert!(
            !std::env::var("BALCAO_REQUIRE_POSTGRES").is_ok_and(|v| v == "1"),
            "BALCAO_REQUIRE_POSTGRES=1 but BALCAO_TEST_POSTGRES_URL is not set"
        );
        return;
    };
    campaign(&["--db", "postgres", "--processes", "3", "--postgres-url", &url]);
}
