//! `balcao chat`: be a customer of a tenant from the terminal, against a running server,
//! without a WhatsApp account. Each line becomes a signed webhook payload (as Meta would send
//! it); replies are read back from the outbox through the simulator API. Lists and buttons are
//! shown as numbered choices: typing the number clicks it.

use std::io::{BufRead, Write};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Value, json};

use crate::domain::Secret;
use crate::whatsapp::OutboundMessage;
use crate::whatsapp::signature::sign;

/// How long to wait for the bot after a message: debounce plus a model turn.
const REPLY_WAIT: Duration = Duration::from_secs(60);
/// Replies that arrive this soon after the last one belong to the same answer.
const SETTLE: Duration = Duration::from_millis(700);

pub struct ChatSession {
    pub url: String,
    pub slug: String,
    pub from: String,
    pub name: String,
    pub secret: Secret,
    pub admin_token: Option<Secret>,
}

/// A choice the customer can click.
struct Choice {
    kind: &'static str,
    id: String,
    title: String,
}

impl ChatSession {
    fn get(&self, http: &reqwest::Client, path: &str) -> reqwest::RequestBuilder {
        let request = http.get(format!("{}{path}", self.url));
        match &self.admin_token {
            Some(token) => request.bearer_auth(token.expose()),
            None => request,
        }
    }

    pub async fn run(&self, input: impl BufRead, mut out: impl Write) -> anyhow::Result<()> {
        let http = reqwest::Client::new();
        let wa_id = self.from.trim_start_matches('+').to_owned();
        let tenant: Value = self
            .get(&http, &format!("/simulator/api/tenants/{}", self.slug))
            .send()
            .await
            .context("failed to reach the server; is `balcao` running?")?
            .error_for_status()
            .context("the server refused the simulator API (set BALCAO_ADMIN_TOKEN when WhatsApp sending is on)")?
            .json()
            .await?;
        let phone_number_id = tenant["phone_number_id"].as_str().context("no phone_number_id")?.to_owned();
        writeln!(
            out,
            "Conversando com {} como {} ({}). Ctrl-D para sair.",
            tenant["name"].as_str().unwrap_or("?"),
            self.name,
            self.from
        )?;
        let mut seen = self.latest(&http, &wa_id).await?;
        let mut choices: Vec<Choice> = Vec::new();
        for (n, line) in input.lines().enumerate() {
            let line = line?;
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            let wamid = format!("wamid.chat.{}.{n}.{}", std::process::id(), uuid::Uuid::new_v4().simple());
            let message = match line.parse::<usize>().ok().and_then(|i| choices.get(i.wrapping_sub(1))) {
                Some(c) => json!({ "from": wa_id, "id": wamid, "timestamp": chrono::Utc::now().timestamp().to_string(),
                                   "type": "interactive", "interactive": { "type": c.kind, c.kind: { "id": c.id, "title": c.title } } }),
                None => json!({ "from": wa_id, "id": wamid, "timestamp": chrono::Utc::now().timestamp().to_string(),
                                "type": "text", "text": { "body": line } }),
            };
            let body = serde_json::to_vec(&json!({
                "object": "whatsapp_business_account",
                "entry": [{ "id": "simulator", "changes": [{ "field": "messages", "value": {
                    "messaging_product": "whatsapp",
                    "metadata": { "display_phone_number": "simulator", "phone_number_id": phone_number_id },
                    "contacts": [{ "profile": { "name": self.name }, "wa_id": wa_id }],
                    "messages": [message]
                }}]}]
            }))?;
            let status = http
                .post(format!("{}/webhooks/whatsapp", self.url))
                .header("content-type", "application/json")
                .header("x-hub-signature-256", sign(self.secret.expose().as_bytes(), &body))
                .body(body)
                .send()
                .await?
                .status();
            if !status.is_success() {
                bail!("the webhook answered {status}; does WHATSAPP_APP_SECRET match the server's?");
            }
            let (replies, last) = self.wait_for_replies(&http, &wa_id, seen).await?;
            seen = last;
            choices.clear();
            for reply in replies {
                render(&reply, &mut choices, &mut out)?;
            }
        }
        Ok(())
    }

    async fn outbox(
        &self,
        http: &reqwest::Client,
        wa_id: &str,
        after: i64,
    ) -> anyhow::Result<Vec<(i64, OutboundMessage)>> {
        let v: Value = self
            .get(http, &format!("/simulator/api/tenants/{}/outbox?wa_id={wa_id}&after={after}", self.slug))
            .send()
            .await?
            .error_for_status()?
            .json()
            .await?;
        Ok(v["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|m| Some((m["id"].as_i64()?, serde_json::from_value(m["message"].clone()).ok()?)))
            .collect())
    }

    async fn latest(&self, http: &reqwest::Client, wa_id: &str) -> anyhow::Result<i64> {
        Ok(self.outbox(http, wa_id, 0).await?.last().map(|(id, _)| *id).unwrap_or(0))
    }

    async fn wait_for_replies(
        &self,
        http: &reqwest::Client,
        wa_id: &str,
        after: i64,
    ) -> anyhow::Result<(Vec<OutboundMessage>, i64)> {
        let started = Instant::now();
        let mut got: Vec<(i64, OutboundMessage)> = Vec::new();
        let mut last_arrival = None;
        while started.elapsed() < REPLY_WAIT {
            let from = got.last().map(|(id, _)| *id).unwrap_or(after);
            let new = self.outbox(http, wa_id, from).await?;
            if !new.is_empty() {
                last_arrival = Some(Instant::now());
                got.extend(new);
            } else if last_arrival.is_some_and(|t| t.elapsed() > SETTLE) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let last = got.last().map(|(id, _)| *id).unwrap_or(after);
        Ok((got.into_iter().map(|(_, m)| m).collect(), last))
    }
}

fn render(message: &OutboundMessage, choices: &mut Vec<Choice>, out: &mut impl Write) -> std::io::Result<()> {
    writeln!(out, "bot> {}", message.body())?;
    match message {
        OutboundMessage::Text { .. } => {}
        OutboundMessage::Buttons { buttons, .. } => {
            for b in buttons {
                choices.push(Choice { kind: "button_reply", id: b.id.clone(), title: b.title.clone() });
                writeln!(out, "  {}) {}", choices.len(), b.title)?;
            }
        }
        OutboundMessage::List { sections, .. } => {
            for r in sections.iter().flat_map(|s| &s.rows) {
                choices.push(Choice { kind: "list_reply", id: r.id.clone(), title: r.title.clone() });
                match &r.description {
                    Some(d) => writeln!(out, "  {}) {} — {d}", choices.len(), r.title)?,
                    None => writeln!(out, "  {}) {}", choices.len(), r.title)?,
                }
            }
        }
    }
    Ok(())
}
