//! Headless Chromium driven through chromedriver (WebDriver, fantoccini over plain loopback
//! HTTP), and a Balcão server per test.
//!
//! [`Browser::start`] returns `None` (after a printed notice) when `/usr/bin/chromium` or
//! `/usr/bin/chromedriver` is missing, unless `BALCAO_REQUIRE_BROWSER=1`, where that is a
//! failure. One browser runs at a time (the machine is small); each step can be saved as a
//! PNG under `$CARGO_TARGET_DIR/browser-artifacts/<test>-<step>.png` ([`Browser::screenshot`]),
//! and a wait that times out saves one before failing.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use balcao::app::App;
use balcao::config::Config;
use fantoccini::elements::Element;
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};
use tokio::process::{Child, Command};
use tokio::sync::{Mutex, MutexGuard, oneshot};

use crate::support::common::TestDb;

pub const CHROMIUM: &str = "/usr/bin/chromium";
pub const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
/// How long a wait lasts before the test fails: a turn, a poll of the event stream and a
/// render, on a busy two-core machine.
pub const WAIT: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(100);

/// One browser at a time, across the tests of this binary.
static ONE_AT_A_TIME: Mutex<()> = Mutex::const_new(());

pub struct Browser {
    pub client: Client,
    /// The test's name: the screenshots' prefix.
    name: String,
    driver: Child,
    _turn: MutexGuard<'static, ()>,
}

fn artifacts_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target"));
    target.join("browser-artifacts")
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().expect("local addr").port()
}

impl Browser {
    /// Starts chromedriver and a headless Chromium session; `None` when they are not
    /// installed (and not required).
    pub async fn start(name: &str) -> Option<Self> {
        if !Path::new(CHROMIUM).exists() || !Path::new(CHROMEDRIVER).exists() {
            if std::env::var("BALCAO_REQUIRE_BROWSER").is_ok_and(|v| v == "1") {
                panic!("BALCAO_REQUIRE_BROWSER=1 but {CHROMIUM} or {CHROMEDRIVER} is missing");
            }
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr(),
                "NOTICE: browser test {name} skipped: install chromium and chromium-driver to run it"
            );
            return None;
        }
        let turn = ONE_AT_A_TIME.lock().await;
        let port = free_port();
        let driver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("start chromedriver");
        let url = format!("http://127.0.0.1:{port}");
        let http = reqwest::Client::new();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            if http.get(format!("{url}/status")).send().await.is_ok_and(|r| r.status().is_success()) {
                break;
            }
            assert!(tokio::time::Instant::now() < deadline, "chromedriver did not answer on {url}");
            tokio::time::sleep(POLL).await;
        }
        let mut capabilities = serde_json::Map::new();
        capabilities.insert(
            "goog:chromeOptions".to_owned(),
            json!({ "binary": CHROMIUM, "args": [
                "--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,900",
                "--disable-gpu", "--no-first-run", "--lang=pt-BR"
            ] }),
        );
        let client = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(capabilities)
            .connect(&url)
            .await
            .expect("open a Chromium session");
        std::fs::create_dir_all(artifacts_dir()).expect("create the artifacts directory");
        Some(Self { client, name: name.to_owned(), driver, _turn: turn })
    }

    pub async fn goto(&self, url: &str) {
        self.client.goto(url).await.unwrap_or_else(|e| panic!("open {url}: {e}"));
    }

    /// Saves the page as `<test>-<step>.png`; returns the file.
    pub async fn screenshot(&self, step: &str) -> PathBuf {
        let path = artifacts_dir().join(format!("{}-{step}.png", self.name));
        match self.client.screenshot().await {
            Ok(png) => {
                if let Err(e) = std::fs::write(&path, png) {
                    eprintln!("cannot save {}: {e}", path.display());
                }
            }
            Err(e) => eprintln!("cannot take the screenshot {step}: {e}"),
        }
        path
    }

    /// Fails the test with a screenshot and the page's text.
    async fn fail(&self, what: &str) -> ! {
        let shot = self.screenshot("timeout").await;
        let text = self.client.execute("return document.body.innerText", vec![]).await.unwrap_or(Value::Null);
        panic!(
            "timed out waiting for {what} (screenshot {}); the page reads:\n{}",
            shot.display(),
            text.as_str().unwrap_or("?")
        );
    }

    /// Waits until the JavaScript expression `condition` (a function body's `return` value,
    /// with `arguments`) is truthy; returns its value.
    pub async fn wait_until(&self, what: &str, condition: &str, args: Vec<Value>) -> Value {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            if let Ok(value) = self.client.execute(condition, args.clone()).await
                && !matches!(value, Value::Null | Value::Bool(false))
            {
                return value;
            }
            if tokio::time::Instant::now() >= deadline {
                self.fail(what).await;
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Waits for the first element matching `css`.
    pub async fn wait_for(&self, css: &str) -> Element {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            if let Ok(element) = self.client.find(Locator::Css(css)).await {
                return element;
            }
            if tokio::time::Instant::now() >= deadline {
                self.fail(css).await;
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Waits until some element matching `css` contains `text`.
    pub async fn wait_for_text(&self, css: &str, text: &str) {
        let script =
            "return [...document.querySelectorAll(arguments[0])].some(e => e.textContent.includes(arguments[1]))";
        self.wait_until(&format!("{text:?} in {css}"), script, vec![json!(css), json!(text)]).await;
    }

    pub async fn click(&self, css: &str) {
        let element = self.wait_for(css).await;
        element.click().await.unwrap_or_else(|e| panic!("click {css}: {e}"));
    }

    /// Replaces an input's value by typing.
    pub async fn fill(&self, css: &str, value: &str) {
        let element = self.wait_for(css).await;
        element.clear().await.unwrap_or_else(|e| panic!("clear {css}: {e}"));
        element.send_keys(value).await.unwrap_or_else(|e| panic!("type into {css}: {e}"));
    }

    /// Runs a script and returns its value.
    pub async fn eval(&self, script: &str, args: Vec<Value>) -> Value {
        self.client.execute(script, args).await.unwrap_or_else(|e| panic!("script failed: {e}"))
    }

    /// Ends the session and chromedriver.
    pub async fn close(mut self) {
        let _ = self.client.close().await;
        let _ = self.driver.kill().await;
    }
}

/// A Balcão server in local mode, as `cargo run` starts it (workers running, nothing sent),
/// without the debounce so turns answer at once.
pub struct Server {
    pub url: String,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<anyhow::Result<()>>>,
}

pub fn local_config() -> Config {
    let vars: std::collections::HashMap<String, String> = [
        ("BALCAO_ADDR", "127.0.0.1:0"),
        ("WHATSAPP_API_URL", "http://127.0.0.1:9"),
        ("BALCAO_DEBOUNCE_MS", "0"),
        ("BALCAO_DEBOUNCE_MAX_MS", "0"),
        ("BALCAO_POLL_INTERVAL_MS", "50"),
        ("BALCAO_SHUTDOWN_GRACE_SECONDS", "5"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    let config = Config::from_vars(&vars).expect("local config");
    assert!(config.whatsapp.local_mode);
    config
}

impl Server {
    pub async fn start(db: &TestDb, config: Config) -> Self {
        let app = App::build(config, db.store.clone()).await.expect("build the app");
        let url = format!("http://{}", app.local_addr().expect("addr"));
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(app.run_until_stopped(async move {
            let _ = stopped.await;
        }));
        Self { url, stop: Some(stop), task: Some(task) }
    }

    /// Applies a tenant file (and its catalog).
    pub async fn apply_tenant(db: &TestDb, file: &str) {
        use balcao::store::{CatalogStore, TenantStore};
        let spec = balcao::tenant::TenantSpec::parse(file).expect("tenant file");
        let outcome = db.store.apply_tenant(&spec, chrono::Utc::now()).await.expect("apply tenant");
        db.store.apply_catalog(outcome.id(), &spec.catalog).await.expect("apply catalog");
    }

    /// Stops the server and waits for it (event streams end with it).
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            task.await.expect("server task").expect("server stopped cleanly");
        }
    }
}
