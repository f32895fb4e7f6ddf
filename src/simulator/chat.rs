//! `balcao chat`: be a customer of a tenant from the terminal, against a running server,
//! without a WhatsApp account. Each line becomes a signed webhook payload (as Meta would send
//! it, built by `crate::simulator::payload`, the web simulator's builder too); replies are read back
//! from the outbox through the simulator API. Lists, buttons and a
//! template's quick replies are shown as numbered choices: typing the number clicks it (a quick
//! reply comes back as a `type: button` message, as Meta sends it).

use std::io::{BufRead, Write};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::Value;

use crate::domain::Secret;
use crate::simulator::payload::{self, Content, Reply, ReplyKind};
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
    kind: ReplyKind,
    id: String,
    title: String,
}

impl Choice {
    /// The `messages[]` element Meta would send for a click on this choice.
    fn message(&self, from: &str, wamid: &str, timestamp: i64) -> Value {
        let reply = Reply { kind: self.kind, id: self.id.clone(), title: self.title.clone(), context: None };
        payload::message(from, wamid, timestamp, &Content::Reply(reply))
    }
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
            if let Some(number) = line.strip_prefix("/pago") {
                self.mark_paid(&http, number.trim(), &mut out).await?;
                let (replies, last) = self.wait_for_replies(&http, &wa_id, seen).await?;
                seen = last;
                for reply in replies {
                    render(&reply, &mut choices, &mut out)?;
                }
                continue;
            }
            let wamid = format!("wamid.chat.{}.{n}.{}", std::process::id(), uuid::Uuid::new_v4().simple());
            let timestamp = chrono::Utc::now().timestamp();
            let message = match line.parse::<usize>().ok().and_then(|i| choices.get(i.wrapping_sub(1))) {
                Some(c) => c.message(&wa_id, &wamid, timestamp),
                None => payload::message(&wa_id, &wamid, timestamp, &Content::Text(line.to_owned())),
            };
            let body = serde_json::to_vec(&payload::envelope(&phone_number_id, &wa_id, &self.name, message))?;
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

    /// `/pago N`: marks sandbox charge N paid, through the simulator API (the same paid path a
    /// provider's notification takes).
    async fn mark_paid(&self, http: &reqwest::Client, number: &str, out: &mut impl Write) -> anyhow::Result<()> {
        let Ok(id) = number.parse::<i64>() else {
            writeln!(out, "uso: /pago NÚMERO (o nº da cobrança)")?;
            return Ok(());
        };
        let request = http
            .post(format!("{}/simulator/api/tenants/{}/charges/{id}/paid", self.url, self.slug))
            .json(&serde_json::json!({}));
        let request = match &self.admin_token {
            Some(token) => request.bearer_auth(token.expose()),
            None => request,
        };
        let response = request.send().await?;
        if !response.status().is_success() {
            writeln!(out, "não foi possível: {}", response.text().await.unwrap_or_default())?;
            return Ok(());
        }
        let answer: Value = response.json().await?;
        let text = if answer["paid"] == true { "marcada como paga" } else { "não estava pendente; nada mudou" };
        writeln!(out, "[cobrança nº {id} {text}]")?;
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
    match message {
        OutboundMessage::Text { body } | OutboundMessage::OrderStatus { body, .. } => writeln!(out, "bot> {body}")?,
        OutboundMessage::Buttons { body, buttons, .. } => {
            writeln!(out, "bot> {body}")?;
            for b in buttons {
                choices.push(Choice { kind: ReplyKind::Button, id: b.id.clone(), title: b.title.clone() });
                writeln!(out, "  {}) {}", choices.len(), b.title)?;
            }
        }
        OutboundMessage::List { body, sections, .. } => {
            writeln!(out, "bot> {body}")?;
            for r in sections.iter().flat_map(|s| &s.rows) {
                choices.push(Choice { kind: ReplyKind::List, id: r.id.clone(), title: r.title.clone() });
                match &r.description {
                    Some(d) => writeln!(out, "  {}) {} — {d}", choices.len(), r.title)?,
                    None => writeln!(out, "  {}) {}", choices.len(), r.title)?,
                }
            }
        }
        OutboundMessage::Template { name, body_params, quick_replies, .. } => {
            // The template's text and button labels live at Meta: show what we sent.
            writeln!(out, "bot> [modelo {name}]")?;
            for p in body_params {
                writeln!(out, "  · {p}")?;
            }
            for payload in quick_replies {
                choices.push(Choice { kind: ReplyKind::QuickReply, id: payload.clone(), title: payload.clone() });
                writeln!(out, "  {}) {payload}", choices.len())?;
            }
        }
        OutboundMessage::QrImage { caption, .. } => match caption {
            Some(c) => writeln!(out, "bot> [QR Code Pix] {c}")?,
            None => writeln!(out, "bot> [QR Code Pix]")?,
        },
        OutboundMessage::OrderDetails { body, amount, description, copia_e_cola, .. } => {
            writeln!(out, "bot> {body}")?;
            writeln!(out, "  Valor: {amount} — {description}")?;
            writeln!(out, "  Pix copia e cola: {copia_e_cola}")?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Cents;
    use serde_json::json;

    fn rendered(message: &OutboundMessage) -> (String, Vec<Choice>) {
        let mut choices = Vec::new();
        let mut out = Vec::new();
        render(message, &mut choices, &mut out).unwrap();
        (String::from_utf8(out).unwrap(), choices)
    }

    #[test]
    fn a_template_shows_its_parameters_and_quick_replies_as_choices() {
        let template = OutboundMessage::Template {
            name: "lembrete_horario".into(),
            language: "pt_BR".into(),
            body_params: vec!["Ana".into(), "amanhã às 14:00".into()],
            quick_replies: vec!["act:7:confirm".into(), "act:7:cancel".into()],
        };
        let (out, choices) = rendered(&template);
        assert_eq!(
            out,
            "bot> [modelo lembrete_horario]\n  · Ana\n  · amanhã às 14:00\n  1) act:7:confirm\n  2) act:7:cancel\n"
        );
        // Picking "2" sends what Meta sends for a quick-reply tap (whatsapp-cloud-api.md §3.4).
        let click = choices[1].message("5511988880000", "wamid.x", 1_750_091_045);
        assert_eq!(
            click,
            json!({ "from": "5511988880000", "id": "wamid.x", "timestamp": "1750091045",
                    "type": "button", "button": { "payload": "act:7:cancel", "text": "act:7:cancel" } })
        );
    }

    #[test]
    fn reply_buttons_still_click_as_interactive_replies() {
        let buttons = OutboundMessage::buttons(
            "Confirma?",
            None,
            vec![crate::whatsapp::ReplyButton { id: "g:yes".into(), title: "Sim".into() }],
        )
        .unwrap();
        let (out, choices) = rendered(&buttons);
        assert_eq!(out, "bot> Confirma?\n  1) Sim\n");
        let click = choices[0].message("5511988880000", "wamid.y", 1);
        assert_eq!(click["type"], "interactive");
        assert_eq!(
            click["interactive"],
            json!({ "type": "button_reply", "button_reply": { "id": "g:yes", "title": "Sim" } })
        );
    }

    #[test]
    fn pix_messages_read_as_text() {
        let (out, _) =
            rendered(&OutboundMessage::QrImage { payload: "000201".into(), caption: Some("Pague aqui".into()) });
        assert_eq!(out, "bot> [QR Code Pix] Pague aqui\n");
        let (out, _) = rendered(&OutboundMessage::QrImage { payload: "000201".into(), caption: None });
        assert_eq!(out, "bot> [QR Code Pix]\n");
        let order = OutboundMessage::OrderDetails {
            reference_id: "cob1".into(),
            body: "Sua cobrança".into(),
            footer: None,
            amount: Cents(5000),
            description: "Corte masculino".into(),
            copia_e_cola: "000201ABC".into(),
            merchant_name: "Zé".into(),
            pix_key: "z@example.com".into(),
            key_type: "EMAIL".into(),
            fallback: "…".into(),
        };
        let (out, choices) = rendered(&order);
        assert_eq!(out, "bot> Sua cobrança\n  Valor: R$ 50,00 — Corte masculino\n  Pix copia e cola: 000201ABC\n");
        assert!(choices.is_empty());
        let status = OutboundMessage::OrderStatus {
            reference_id: "cob1".into(),
            status: "completed".into(),
            body: "Pago!".into(),
        };
        assert_eq!(rendered(&status).0, "bot> Pago!\n");
    }
}
