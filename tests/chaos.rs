//! The chaos campaign's several-processes case as a test: its binary (`src/bin/chaos`) with three
//! servers sharing one PostgreSQL, each webhook to a random one (concurrent duplicates spread
//! over processes, processes killed mid-turn and taken over, rolling restarts), with every fault
//! kind in play. A fixed seed, so a failure replays by the command it prints. `.ci/run` plays
//! 200 more runs, on both databases. A test binary of its own, so it runs alone.

use std::process::Command;

#[test]
fn three_processes_on_one_postgres_keep_every_invariant() {
    let Ok(url) = std::env::var("BALCAO_TEST_POSTGRES_URL") else {
        assert!(
            !std::env::var("BALCAO_REQUIRE_POSTGRES").is_ok_and(|v| v == "1"),
            "BALCAO_REQUIRE_POSTGRES=1 but BALCAO_TEST_POSTGRES_URL is not set"
        );
        return;
    };
    let output = Command::new(env!("CARGO_BIN_EXE_chaos"))
        .args(["--runs", "8", "--parallel", "8", "--seed", "1203", "--db", "postgres", "--processes", "3"])
        .args(["--postgres-url", &url])
        .output()
        .expect("run the chaos binary");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "the campaign found violations:\n{stdout}\n{stderr}");
    assert!(stdout.contains("| runs with a violation | 0 |"), "{stdout}");
}
