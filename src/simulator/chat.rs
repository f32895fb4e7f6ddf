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

use crate::domain::{PhoneE164, Secret};
use crate::simulator::payload::{self, Content, Reply, ReplyKind};
use crate::whatsapp::OutboundMessage;
use crate::whatsapp::signature::sign;

/// The longest wait for the bot after a message: debounce plus a slow model turn. A line that
/// gets no answer returns as soon as nothing is left to run.
const REPLY_WAIT: Duration = Duration::from_secs(60);
/// Replies that arrive this soon after the last one belong to the same answer.
const SETTLE: Duration = Duration::from_millis(700);
const POLL: Duration = Duration::from_millis(200);
/// `--name`'s default: a customer's profile name.
pub const DEFAULT_NAME: &str = "Ana";

#[derive(Clone)]
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

    /// The tenant as the simulator API describes it, or an error a person can act on.
    async fn tenant(&self, http: &reqwest::Client) -> anyhow::Result<Value> {
        let response =
            self.get(http, &format!("/simulator/api/tenants/{}", self.slug)).send().await.with_context(|| {
                format!("não consegui falar com o servidor em {}: o `balcao` está rodando?", self.url)
            })?;
        let status = response.status();
        if status.as_u16() == 404 {
            bail!(
                "não existe loja {:?} neste servidor: use o slug do arquivo da loja (por exemplo tenants/example.toml)",
                self.slug
            );
        }
        if status.as_u16() == 401 || status.as_u16() == 403 {
            let why = response.text().await.unwrap_or_default();
            bail!(
                "o servidor recusou o simulador ({status}{}). Fora do modo local, defina BALCAO_ADMIN_TOKEN igual ao do \
                 servidor; ele só atende lojas de teste",
                if why.is_empty() { String::new() } else { format!(": {why}") }
            );
        }
        if !status.is_success() {
            bail!("o servidor respondeu {status} ao procurar a loja {:?}", self.slug);
        }
        Ok(response.json().await?)
    }

    /// Reads lines from `input` until it ends, showing a prompt before each and the bot's
    /// answers after; a line that gets no answer says so as soon as nothing is left to run.
    pub async fn run(&self, mut input: impl BufRead, mut out: impl Write) -> anyhow::Result<()> {
        let http = reqwest::Client::new();
        let wa_id = self.from.trim_start_matches('+').to_owned();
        let tenant = self.tenant(&http).await?;
        let phone_number_id = tenant["phone_number_id"].as_str().context("o servidor não disse o número da loja")?;
        let business = tenant["name"].as_str().unwrap_or("?");
        // With or without a Brazilian mobile's ninth digit, as the server matches staff.
        let me = PhoneE164::parse(&self.from).ok();
        let staff = tenant["staff"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| PhoneE164::parse(p.as_str()?).ok())
            .any(|p| me.as_ref().is_some_and(|me| p.same_person(me)));
        // The staff side is the business itself, whatever profile name a customer would have.
        let name = if staff && self.name == DEFAULT_NAME { business } else { self.name.as_str() };
        let (who, prompt) = if staff { ("equipe", "equipe> ") } else { (name, "você> ") };
        writeln!(out, "Conversando com {business} como {who} ({}). Ctrl-D para sair.", self.from)?;
        let mut seen = self.latest(&http, &wa_id).await?;
        let mut choices: Vec<Choice> = Vec::new();
        let mut line = String::new();
        for n in 0.. {
            write!(out, "{prompt}")?;
            out.flush()?;
            line.clear();
            if input.read_line(&mut line)? == 0 {
                writeln!(out)?;
                break;
            }
            let text = line.trim();
            if text.is_empty() {
                continue;
            }
            if let Some(number) = text.strip_prefix("/pago") {
                if !self.mark_paid(&http, number.trim(), &mut out).await? {
                    continue;
                }
            } else {
                let wamid = format!("wamid.chat.{}.{n}.{}", std::process::id(), uuid::Uuid::new_v4().simple());
                let timestamp = chrono::Utc::now().timestamp();
                let message = match text.parse::<usize>().ok().and_then(|i| choices.get(i.wrapping_sub(1))) {
                    Some(c) => c.message(&wa_id, &wamid, timestamp),
                    None => payload::message(&wa_id, &wamid, timestamp, &Content::Text(text.to_owned())),
                };
                let body = serde_json::to_vec(&payload::envelope(phone_number_id, &wa_id, name, message))?;
                let status = http
                    .post(format!("{}/webhooks/whatsapp", self.url))
                    .header("content-type", "application/json")
                    .header("x-hub-signature-256", sign(self.secret.expose().as_bytes(), &body))
                    .body(body)
                    .send()
                    .await
                    .with_context(|| format!("não consegui falar com o servidor em {}", self.url))?
                    .status();
                if !status.is_success() {
                    bail!("o webhook respondeu {status}: o WHATSAPP_APP_SECRET daqui é o mesmo do servidor?");
                }
            }
            let (replies, last) = self.wait_for_replies(&http, &wa_id, seen).await?;
            seen = last;
            if replies.is_empty() {
                writeln!(out, "(sem resposta)")?;
                continue;
            }
            choices.clear();
            for reply in replies {
                render(&reply, &mut choices, &mut out)?;
            }
        }
        Ok(())
    }

    /// `/pago N`: marks sandbox charge N paid, through the simulator API (the same paid path a
    /// provider's notification takes).
    /// Whether the charge moved (answers may follow).
    async fn mark_paid(&self, http: &reqwest::Client, number: &str, out: &mut impl Write) -> anyhow::Result<bool> {
        let Ok(id) = number.parse::<i64>() else {
            writeln!(out, "uso: /pago NÚMERO (o nº da cobrança)")?;
            return Ok(false);
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
            let why = match response.status().as_u16() {
                404 => "não existe".to_owned(),
                _ => response.text().await.unwrap_or_default(),
            };
            writeln!(out, "[cobrança nº {id}: não foi possível marcar como paga: {why}]")?;
            return Ok(false);
        }
        let answer: Value = response.json().await?;
        let paid = answer["paid"] == true;
        let text = if paid { "marcada como paga" } else { "não estava pendente; nada mudou" };
        writeln!(out, "[cobrança nº {id} {text}]")?;
        Ok(paid)
    }

    /// The messages to `wa_id` after `after`, and whether a turn may still add some.
    async fn outbox(
        &self,
        http: &reqwest::Client,
        wa_id: &str,
        after: i64,
    ) -> anyhow::Result<(Vec<(i64, OutboundMessage)>, bool)> {
        let v: Value = self
            .get(http, &format!("/simulator/api/tenants/{}/outbox?wa_id={wa_id}&after={after}", self.slug))
            .send()
            .await?
            .error_for_status()?
            .json()
            .await?;
        let messages = v["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|m| Some((m["id"].as_i64()?, serde_json::from_value(m["message"].clone()).ok()?)))
            .collect();
        Ok((messages, v["pending"] != false))
    }

    async fn latest(&self, http: &reqwest::Client, wa_id: &str) -> anyhow::Result<i64> {
        Ok(self.outbox(http, wa_id, 0).await?.0.last().map(|(id, _)| *id).unwrap_or(0))
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
            let (new, pending) = self.outbox(http, wa_id, from).await?;
            if !new.is_empty() {
                last_arrival = Some(Instant::now());
                got.extend(new);
            } else if !pending && last_arrival.unwrap_or(started).elapsed() > SETTLE {
                // Nothing left to run, and nothing came for a moment: the answer is complete
                // (or there is none: a handoff, a reaction, a payment told to someone else).
                break;
            }
            tokio::time::sleep(POLL).await;
        }
        let last = got.last().map(|(id, _)| *id).unwrap_or(after);
        Ok((got.into_iter().map(|(_, m)| m).collect(), last))
    }
}

fn render(message: &OutboundMessage, choices: &mut Vec<Choice>, out: &mut impl Write) -> std::io::Result<()> {
    match message {
        OutboundMessage::Text { body } | OutboundMessage::OrderStatus { body, .. } => writeln!(out, "bot> {body}")?,
        OutboundMessage::Location { latitude, longitude, name, address } => {
            let place = [name.as_deref(), address.as_deref()].into_iter().flatten().collect::<Vec<_>>().join(" — ");
            writeln!(out, "bot> [localização] {place} ({latitude}, {longitude})")?
        }
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
