//! Browser tests: headless Chromium against a real server, driven from Rust (fantoccini and
//! chromedriver). The harness ([`harness`]) is shared by every page's tests: the simulator's
//! here, the console's beside them.
//!
//! Each case runs on SQLite, and on PostgreSQL when `BALCAO_TEST_POSTGRES_URL` is set
//! (`contract!`). Without Chromium the cases print a notice and pass, unless
//! `BALCAO_REQUIRE_BROWSER=1` (CI), where that fails.

#[allow(dead_code, unused_imports)]
#[path = "../api/support"]
mod support {
    pub mod common;
}

pub mod harness;

mod console;
mod readme_demo;
mod simulator;
