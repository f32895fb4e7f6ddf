//! The model-driven turn: load history, add the turn's messages, call the model, run tools,
//! loop until the model ends the turn (or the step limit), reply, and record the turn.
//!
//! Invariants:
//! - tool inputs are checked against the tool's declared fields before anything runs; an
//!   invalid input goes back as an error result, never coerced;
//! - even when a provider ignores the one-call switch: identical calls in one response run
//!   once, and of several write calls only the first runs (the others are answered with an
//!   error asking to call again if still needed); every tool id is answered;
//! - write tools run through the executor, so a turn that is retried from scratch after a
//!   crash gets `already_done`, never a second effect;
//! - a turn's messages are recorded once, with its reply, at the turn's end (one transaction
//!   with the job's completion); history is trimmed by whole turns, so a `tool_use` is never
//!   separated from its `tool_result`;
//! - when the model provider fails after its retries, the customer still gets an answer;
//! - every model call of the turn (failed ones too) is recorded with the turn's history, in
//!   the same transaction, for the console's trace.

use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use async_trait::async_trait;
use chrono::Utc;
use serde_json::Value;

use crate::jobs::{Replier, Turn, TurnHandler, TurnHistory};
use crate::ledger::{Executor, LedgerState, Tool};
use crate::llm::{Block, ChatMessage, ModelClient, ModelRequest, Role, StopReason, ToolDef};
use crate::messages::{self, AgentGaveUp, AgentUnavailable, InboundLine, MerchantPrompt, SystemPrompt, TurnContext};
use crate::metrics::{Metrics, stop_label};
use crate::store::{CatalogStore, HistoryStore, InboundMessage, LedgerStore, ModelCall, Store};
use crate::whatsapp::OutboundMessage;

/// WhatsApp text bodies hold 4,096 characters; longer answers go out in parts.
const REPLY_PART_CHARS: usize = 4000;

#[derive(Debug, Clone)]
pub struct AgentSettings {
    pub max_steps: u32,
    pub max_tokens: u32,
    /// At most this many earlier turns are loaded...
    pub history_turns: i64,
    /// ...and the oldest are dropped until the request's messages fit this many characters.
    pub history_budget_chars: usize,
}

pub struct AgentTurn {
    pub store: Store,
    pub executor: Executor,
    pub model: Arc<dyn ModelClient>,
    /// `anthropic` or `openai`: stored with each message, so a provider change rebuilds raw
    /// messages from their neutral blocks.
    pub provider: &'static str,
    pub replier: Replier,
    pub tools: Vec<Arc<dyn Tool>>,
    pub settings: AgentSettings,
    /// Answers when the model provider cannot (the guided agent).
    pub fallback: Arc<dyn TurnHandler>,
    /// Whom the agent talks with: a customer, or the business's staff (other prompt, tools).
    pub audience: Audience,
    /// Model call latency goes to `model_call_seconds`.
    pub metrics: Metrics,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Audience {
    Customer,
    Merchant,
}

/// The customer's messages as one user message: text as typed (a voice note as transcribed),
/// a click as the option chosen, anything else as a bracketed line ([`InboundLine`]).
fn user_text(messages: &[InboundMessage]) -> anyhow::Result<String> {
    let lines = messages
        .iter()
        .map(|m| match (m.kind.as_str(), m.body.as_deref(), m.reply_id.as_deref()) {
            ("text", Some(body), _) => Ok(body.to_owned()),
            (_, Some(title), Some(id)) => Ok(format!("[escolheu a opção \"{title}\" (id {id})]")),
            (kind, label, _) => messages::render(&InboundLine { kind, label, error_code: m.error_code }),
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(lines.join("\n"))
}

fn chars(messages: &[ChatMessage]) -> usize {
    messages.iter().map(|m| serde_json::to_string(m).map(|s| s.len()).unwrap_or(0)).sum()
}

/// Drops whole turns, oldest first, until the history fits `budget` next to `current`.
fn trim(history: Vec<crate::store::StoredMessage>, provider: &str, budget: usize, current: usize) -> Vec<ChatMessage> {
    let mut turns: Vec<Vec<ChatMessage>> = Vec::new();
    let mut last = None;
    for stored in history {
        let mut message = stored.message;
        if stored.provider != provider {
            message.raw = None;
        }
        if last != Some(stored.turn) {
            turns.push(Vec::new());
            last = Some(stored.turn);
        }
        if let Some(turn) = turns.last_mut() {
            turn.push(message);
        }
    }
    let mut total: usize = current + turns.iter().map(|t| chars(t)).sum::<usize>();
    let mut start = 0;
    while total > budget && start < turns.len() {
        total -= chars(&turns[start]);
        start += 1;
    }
    turns.into_iter().skip(start).flatten().collect()
}

impl AgentTurn {
    async fn customer_prompt(&self, tenant: &crate::tenant::Tenant) -> anyhow::Result<String> {
        let (services, professionals) = self.store.catalog(tenant.id).await?;
        let services = services
            .iter()
            .map(|s| (format!("{} (service_id {}): {} min, {}", s.name, s.id, s.duration_minutes, s.price),))
            .collect();
        let professionals = professionals
            .iter()
            .map(|p| {
                let hours: std::collections::BTreeMap<String, Vec<String>> = p.hours.clone().into();
                let week = crate::booking::catalog::DAYS
                    .iter()
                    .filter_map(|(d, _)| hours.get(*d).map(|r| format!("{d} {}", r.join(", "))))
                    .collect::<Vec<_>>()
                    .join("; ");
                (format!(
                    "{} (professional_id {}): {}",
                    p.name,
                    p.id,
                    if week.is_empty() { "sem horários" } else { &week }
                ),)
            })
            .collect();
        messages::render(&SystemPrompt {
            business: &tenant.name,
            timezone: tenant.timezone.name(),
            address: tenant.settings.address.as_ref().map(|a| a.text.as_str()),
            services,
            professionals,
        })
    }

    async fn system(&self, turn: &Turn) -> anyhow::Result<(String, String)> {
        let tenant = &turn.tenant;
        let system = match self.audience {
            Audience::Merchant => {
                messages::render(&MerchantPrompt { business: &tenant.name, timezone: tenant.timezone.name() })?
            }
            Audience::Customer => self.customer_prompt(tenant).await?,
        };
        // Finished effects and calls still in flight (an attempt that crashed mid-call): the
        // model must not ask for the same thing another way (another professional, say).
        let effects = self
            .store
            .executions_of_conversation(tenant.id, turn.conversation)
            .await?
            .into_iter()
            .filter_map(|e| {
                let status = match e.state()? {
                    LedgerState::Succeeded => "done",
                    LedgerState::Running | LedgerState::OutcomeUnknown => "in progress, not confirmed yet",
                    _ => return None,
                };
                let result = e.result.map(|r| r.0).unwrap_or(Value::Null);
                Some(format!("{} {} → {status}: {}", e.tool, e.arguments.0, result))
            })
            .collect();
        let now = Utc::now().with_timezone(&tenant.timezone).format("%Y-%m-%d %H:%M (%A)").to_string();
        let context = messages::render(&TurnContext {
            now,
            timezone: tenant.timezone.name(),
            customer: turn.contact.profile_name.as_deref(),
            effects,
        })?;
        Ok((system, context))
    }

    /// Runs one response's tool calls and returns the user message carrying their results.
    async fn run_tools(&self, turn: &Turn, calls: &[&Block]) -> anyhow::Result<ChatMessage> {
        let mut answered: Vec<(String, String, bool)> = Vec::new(); // (canonical call, content, is_error)
        let mut results = Vec::new();
        let mut wrote = false;
        for call in calls {
            let Block::ToolUse { id, name, input, input_error } = call else { continue };
            let canonical = format!("{name}:{input}");
            let (content, is_error) = if let Some((_, content, is_error)) =
                answered.iter().find(|(c, _, _)| *c == canonical)
            {
                // The same call twice in one response: it ran once, both ids get its answer.
                (content.clone(), *is_error)
            } else {
                let (content, is_error) = match (input_error, self.tools.iter().find(|t| t.spec().name == name)) {
                    (Some(reason), _) => (format!("{{\"error\":\"invalid input: {}\"}}", reason.replace('"', "'")), true),
                    (None, None) => (format!("{{\"error\":\"unknown tool {name}\"}}"), true),
                    (None, Some(tool)) if tool.spec().is_write() && wrote => (
                        "{\"error\":\"Not executed: only one action that changes something per response. Call it again if it is still needed.\"}".to_owned(),
                        true,
                    ),
                    (None, Some(tool)) => {
                        wrote |= tool.spec().is_write();
                        let ctx = turn.call_context(Some(id));
                        let outcome = self.executor.execute(tool.as_ref(), &ctx, input).await?;
                        (outcome.to_model_json().to_string(), outcome.is_error())
                    }
                };
                answered.push((canonical, content.clone(), is_error));
                (content, is_error)
            };
            results.push(Block::ToolResult { tool_use_id: id.clone(), content, is_error });
        }
        Ok(ChatMessage { role: Role::User, blocks: results, raw: None })
    }

    fn reply(&self, turn: &Turn, text: &str) -> anyhow::Result<()> {
        let chars: Vec<char> = text.chars().collect();
        for (seq, part) in chars.chunks(REPLY_PART_CHARS).enumerate() {
            let part: String = part.iter().collect();
            self.replier.reply(turn, seq as u32, OutboundMessage::text(part)?);
        }
        Ok(())
    }
}

#[async_trait]
impl TurnHandler for AgentTurn {
    async fn handle(&self, turn: &Turn) -> anyhow::Result<()> {
        let tenant = &turn.tenant;
        if self.store.turn_recorded(tenant.id, turn.id).await? {
            return Ok(()); // this turn already ended (history, reply and completion land together)
        }
        let (system_static, system_dynamic) = self.system(turn).await.context("failed to build the prompt")?;
        let mut this_turn = vec![ChatMessage::user_text(user_text(&turn.messages)?)];
        let history = self.store.history(tenant.id, turn.conversation, turn.id, self.settings.history_turns).await?;
        let budget = self.settings.history_budget_chars.saturating_sub(system_static.len() + system_dynamic.len());
        let mut history = trim(history, self.provider, budget, chars(&this_turn));
        let read_tools = self.tools.iter().filter(|t| !t.spec().is_write()).map(|t| t.spec().name).collect();
        super::stale_reads::omit_stale_reads(&mut history, &read_tools);
        let tools: Vec<ToolDef> = self
            .tools
            .iter()
            .map(|t| ToolDef {
                name: t.spec().name.to_owned(),
                description: t.spec().description.to_owned(),
                input_schema: t.spec().input_schema(),
            })
            .collect();
        let single_tool_call = self.tools.iter().any(|t| t.spec().is_write());

        let mut answer = None;
        let mut trace: Vec<ModelCall> = Vec::new();
        for _ in 0..self.settings.max_steps {
            let request = ModelRequest {
                system_static: system_static.clone(),
                system_dynamic: system_dynamic.clone(),
                tools: tools.clone(),
                messages: history.iter().chain(&this_turn).cloned().collect(),
                single_tool_call,
                max_tokens: self.settings.max_tokens,
            };
            let started = Instant::now();
            let response = self.model.complete(&request).await;
            let stop = response.as_ref().map_or("error", |r| stop_label(&r.stop));
            let elapsed = started.elapsed();
            self.metrics.observe_model_call(self.provider, stop, elapsed);
            trace.push(ModelCall {
                turn_id: turn.id.0,
                seq: trace.len() as i64,
                provider: self.provider.to_owned(),
                request_id: response.as_ref().ok().and_then(|r| r.request_id.clone()),
                stop_reason: stop.to_owned(),
                latency_ms: i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX),
                input_tokens: response.as_ref().map_or(0, |r| i64::try_from(r.input_tokens).unwrap_or(i64::MAX)),
                output_tokens: response.as_ref().map_or(0, |r| i64::try_from(r.output_tokens).unwrap_or(i64::MAX)),
            });
            let response = match response {
                Ok(r) => r,
                Err(e) if this_turn.len() == 1 => {
                    // Nothing happened yet this turn: the guided agent answers it instead.
                    tracing::error!(error = %e, "model unavailable; the guided agent answers");
                    self.fallback.handle(turn).await?;
                    let note = messages::render(&AgentUnavailable { business: &tenant.name })?;
                    this_turn.push(ChatMessage {
                        role: Role::Assistant,
                        blocks: vec![Block::Text { text: note }],
                        raw: None,
                    });
                    self.record(turn, this_turn, trace);
                    return Ok(());
                }
                Err(e) => {
                    tracing::error!(error = %e, "model unavailable mid-turn; answering without it");
                    answer = Some(messages::render(&AgentUnavailable { business: &tenant.name })?);
                    break;
                }
            };
            tracing::info!(request_id = ?response.request_id, stop = ?response.stop, "model answered");
            let calls: Vec<&Block> = response.tool_uses().collect();
            // An empty answer is not kept: providers refuse empty assistant messages in history
            // (the reply actually sent closes the turn instead).
            if !response.blocks.is_empty() {
                this_turn.push(ChatMessage {
                    role: Role::Assistant,
                    blocks: response.blocks.clone(),
                    raw: Some(response.raw.clone()),
                });
            }
            if calls.is_empty() || response.stop == StopReason::MaxTokens {
                let text = response.text();
                answer = (!text.trim().is_empty()).then_some(text);
                if response.stop == StopReason::MaxTokens && !calls.is_empty() {
                    // A truncated call is never executed; its ids still need answers.
                    let results = calls
                        .iter()
                        .filter_map(|b| if let Block::ToolUse { id, .. } = b { Some(id.clone()) } else { None })
                        .map(|id| Block::ToolResult {
                            tool_use_id: id,
                            content: "{\"error\":\"truncated; not executed\"}".into(),
                            is_error: true,
                        })
                        .collect();
                    this_turn.push(ChatMessage { role: Role::User, blocks: results, raw: None });
                    answer = None;
                }
                break;
            }
            let results = self.run_tools(turn, &calls).await?;
            this_turn.push(results);
        }
        let text = match answer {
            Some(text) => text,
            None => messages::render(&AgentGaveUp { business: &tenant.name })?,
        };
        self.reply(turn, &text)?;
        if this_turn.last().is_some_and(|m| m.role == Role::User) {
            // The history must end with the model: close it with what the customer was told.
            this_turn.push(ChatMessage {
                role: Role::Assistant,
                blocks: vec![Block::Text { text: text.clone() }],
                raw: None,
            });
        }
        self.record(turn, this_turn, trace);
        Ok(())
    }
}

impl AgentTurn {
    /// Stages the turn's history and model calls: they are written at the turn's end, with its
    /// replies and the job's completion.
    fn record(&self, turn: &Turn, messages: Vec<ChatMessage>, calls: Vec<ModelCall>) {
        turn.stage_history(TurnHistory { provider: self.provider.to_owned(), messages, calls });
    }
}
