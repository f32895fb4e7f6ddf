//! The console as a browser uses it: a cookie jar, the login, forms with their CSRF token.

use crate::support::common::*;
use balcao::store::ConversationViewStore;
use reqwest::StatusCode;
use std::collections::BTreeMap;
use std::sync::Mutex;

pub const PASSWORD: &str = "senha-forte-123";

/// A browser without JavaScript: keeps cookies, remembers the last page's CSRF token and puts it
/// in every form it posts, follows no redirects (tests read them).
pub struct Console {
    pub base: String,
    http: reqwest::Client,
    cookies: Mutex<BTreeMap<String, String>>,
    pub csrf: Mutex<Option<String>>,
    /// The client address a proxy in front of the server reports (`X-Forwarded-For`).
    source: Option<String>,
}

pub struct Page {
    pub status: StatusCode,
    pub location: Option<String>,
    pub body: String,
}

impl Console {
    pub fn new(base: &str) -> Self {
        let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().expect("client");
        Self { base: base.to_owned(), http, cookies: Mutex::default(), csrf: Mutex::default(), source: None }
    }

    /// A browser behind the proxy at address `ip` (the server trusts `X-Forwarded-For`).
    pub fn from_source(base: &str, ip: &str) -> Self {
        Self { source: Some(ip.to_owned()), ..Self::new(base) }
    }

    fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let request = self.http.request(method, format!("{}{path}", self.base)).header("cookie", self.cookie_header());
        match &self.source {
            // A client's own earlier hop, which the server must ignore, then the proxy's.
            Some(ip) => request.header("x-forwarded-for", format!("10.9.8.7, {ip}")),
            None => request,
        }
    }

    /// The same browser pointed at another server (its cookies kept).
    pub fn moved_to(self, base: &str) -> Self {
        Self { base: base.to_owned(), ..self }
    }

    /// Creates the admin for `slug` and logs in.
    pub async fn login_new(db: &TestDb, base: &str, email: &str, slug: &str) -> Self {
        balcao::http::console::auth::add_admin(&db.store, email, PASSWORD, slug).await.expect("add admin");
        let console = Self::new(base);
        let page = console.login(email, PASSWORD).await;
        assert_eq!(page.status, StatusCode::SEE_OTHER, "login failed: {}", page.body);
        console
    }

    pub async fn login(&self, email: &str, password: &str) -> Page {
        if self.csrf.lock().unwrap().is_none() {
            self.get("/admin/login").await;
        }
        self.post("/admin/login", &[("email", email), ("password", password)]).await
    }

    /// Logs in with a TOTP code too.
    pub async fn login_with_code(&self, email: &str, password: &str, code: &str) -> Page {
        if self.csrf.lock().unwrap().is_none() {
            self.get("/admin/login").await;
        }
        self.post("/admin/login", &[("email", email), ("password", password), ("code", code)]).await
    }

    pub fn cookie_header(&self) -> String {
        self.cookies.lock().unwrap().iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join("; ")
    }

    async fn read(&self, response: reqwest::Response) -> Page {
        for value in response.headers().get_all("set-cookie") {
            let pair = value.to_str().unwrap().split(';').next().unwrap();
            let (name, value) = pair.split_once('=').unwrap();
            let expired = value.is_empty() || value.contains("Max-Age=0");
            let mut jar = self.cookies.lock().unwrap();
            if expired {
                jar.remove(name)
            } else {
                jar.insert(name.to_owned(), value.to_owned())
            };
        }
        let status = response.status();
        let location = response.headers().get("location").map(|v| v.to_str().unwrap().to_owned());
        let body = response.text().await.unwrap();
        if let Some(token) = field_value(&body, "authenticity_token") {
            *self.csrf.lock().unwrap() = Some(token);
        }
        Page { status, location, body }
    }

    pub async fn get(&self, path: &str) -> Page {
        let response = self.request(reqwest::Method::GET, path).send().await.unwrap();
        self.read(response).await
    }

    /// Posts a form with the last page's CSRF token.
    pub async fn post(&self, path: &str, fields: &[(&str, &str)]) -> Page {
        let token = self.csrf.lock().unwrap().clone().unwrap_or_default();
        let mut form: Vec<(&str, &str)> = vec![("authenticity_token", &token)];
        form.extend_from_slice(fields);
        self.post_raw(path, &form).await
    }

    /// Posts exactly these fields (no CSRF token unless given).
    pub async fn post_raw(&self, path: &str, fields: &[(&str, &str)]) -> Page {
        let response = self.request(reqwest::Method::POST, path).form(fields).send().await.unwrap();
        self.read(response).await
    }
}

/// The `value` of the first `<input name="{name}" …>` in a page.
pub fn field_value(html: &str, name: &str) -> Option<String> {
    let at = html.find(&format!("name=\"{name}\""))?;
    let rest = &html[at..];
    let v = rest.find("value=\"")? + 7;
    let end = rest[v..].find('"')?;
    Some(rest[v..v + end].to_owned())
}

/// A server with one tenant (`s.tenant`), nothing else.
pub struct ConsoleApp {
    pub tenant: balcao::tenant::Tenant,
    pub app: TestApp,
}

impl ConsoleApp {
    pub async fn spawn(db: &TestDb) -> Self {
        let tenant = db.tenant().await;
        let proxied = [("BALCAO_TRUSTED_PROXY_HEADER", "X-Forwarded-For")];
        let app = TestApp::spawn(db, test_config("http://127.0.0.1:9", &proxied)).await;
        Self { tenant, app }
    }
}

/// The conversation of `wa_id` in the tenant.
pub async fn conversation_of(db: &TestDb, tenant: balcao::domain::TenantId, wa_id: &str) -> i64 {
    db.store
        .conversations_page(tenant, 500, 0)
        .await
        .unwrap()
        .into_iter()
        .find(|c| c.wa_id.as_deref() == Some(wa_id))
        .map(|c| c.id)
        .expect("a conversation")
}
