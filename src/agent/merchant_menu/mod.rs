//! The staff's guided menu, a list: "Nova cobrança" (amount → customer's phone → the
//! customer's CPF or CNPJ, when the Pix provider needs one and the customer has none yet →
//! description → the charge's Confirmar/Cancelar buttons), "Devolver um Pix" (a paid charge →
//! everything or a typed amount → the refund's Confirmar/Cancelar buttons), "Cancelar
//! cobrança" (a pending charge, closed at once), "Cobranças de hoje", "Agenda de hoje".
//!
//! Invariants:
//! - the form's place is stored per conversation together with the turn that moved it and
//!   the place before, so a retried turn reads its message against the same step again;
//! - charges and refunds are proposed through `propose_charge` and `propose_refund` (ledger,
//!   per-turn key) and happen only on their buttons, like the model's; a cancellation goes
//!   through `cancel_pix_charge` (ledger, keyed by the charge);
//! - anything not understood brings back the menu; "cancelar" leaves the form.

mod screens;

use std::sync::Arc;

use async_trait::async_trait;
use chrono::Utc;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::domain::{Cents, MoneyError, PayerDocument, PhoneE164};
use crate::jobs::{Replier, Turn, TurnHandler};
use crate::ledger::normalize::{FieldKind, normalize_text};
use crate::ledger::{Executor, Outcome, Tool};
use crate::messages::{AmountProblem, MerchantText as M, merchant_text};
use crate::store::{MenuStore, Store};
use crate::whatsapp::OutboundMessage;

const NEW_CHARGE: &str = "m:charge";
const REFUND: &str = "m:refund";
const WITHDRAW: &str = "m:withdraw";
const TODAY: &str = "m:today";
const AGENDA: &str = "m:agenda";
/// A charge picked from the refund list: `m:refund:{id}`; everything: `m:refund_all:{id}`.
const REFUND_CHARGE: &str = "m:refund:";
const REFUND_ALL: &str = "m:refund_all:";
/// A charge picked from the cancellation list: `m:withdraw:{id}`.
const WITHDRAW_CHARGE: &str = "m:withdraw:";
/// A customer picked from "Nova cobrança"'s recent ones: `m:to:{digits}`.
const CHARGE_TO: &str = "m:to:";

/// Where the merchant is in the "Nova cobrança" form.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "step", rename_all = "snake_case")]
enum Form {
    Amount,
    Phone {
        amount: Cents,
    },
    Document {
        amount: Cents,
        phone: PhoneE164,
    },
    Description {
        amount: Cents,
        phone: PhoneE164,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        document: Option<PayerDocument>,
    },
    /// "Devolver um Pix": the charge picked; the amount is next.
    RefundAmount {
        charge_id: i64,
    },
}

/// What is stored: the place after turn `turn`, and the place before it.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Stored {
    turn: i64,
    before: Option<Form>,
    after: Option<Form>,
}

pub struct MerchantMenu {
    pub store: Store,
    pub executor: Executor,
    /// The merchant tools (`propose_charge`, `propose_refund`, `cancel_pix_charge`, `list_charges`,
    /// `agenda`).
    pub tools: Vec<Arc<dyn Tool>>,
    pub replier: Replier,
}

/// A phone as a merchant types it: with or without +55, spaces, dashes and parentheses.
/// A positive amount typed into a form, or why it is not one.
fn amount(raw: &str) -> Result<Cents, AmountProblem> {
    match Cents::parse_brl(raw) {
        Ok(amount) if amount.0 > 0 => Ok(amount),
        Ok(_) => Err(AmountProblem::Zero),
        Err(MoneyError::TooLarge(_)) => Err(AmountProblem::TooLarge),
        Err(MoneyError::Unreadable(_)) => Err(AmountProblem::Unreadable),
    }
}

fn parse_phone(raw: &str) -> Option<PhoneE164> {
    let digits: String = raw.chars().filter(|c| !matches!(c, ' ' | '-' | '(' | ')' | '.')).collect();
    let digits = match digits.strip_prefix('+') {
        Some(international) => international.to_owned(),
        // DDD + number (10 or 11 digits): a Brazilian number.
        None if matches!(digits.len(), 10 | 11) => format!("55{digits}"),
        None => digits,
    };
    PhoneE164::parse(&digits).ok()
}

fn text(screen: M<'_>) -> anyhow::Result<OutboundMessage> {
    Ok(OutboundMessage::text(merchant_text(screen)?)?)
}

impl MerchantMenu {
    fn menu(&self, turn: &Turn, body: Option<String>) -> anyhow::Result<OutboundMessage> {
        let body = match body {
            Some(b) => b,
            None => merchant_text(M::Menu { business: &turn.tenant.name })?,
        };
        let rows = [
            (NEW_CHARGE, M::NewChargeButton),
            (REFUND, M::RefundButton),
            (WITHDRAW, M::WithdrawButton),
            (TODAY, M::TodayButton),
            (AGENDA, M::AgendaButton),
        ]
        .into_iter()
        .map(|(id, label)| screens::row(id.to_owned(), merchant_text(label)?, None))
        .collect::<anyhow::Result<Vec<_>>>()?;
        screens::list(body, &merchant_text(M::MenuButton)?, rows)
    }

    async fn form(&self, turn: &Turn) -> anyhow::Result<Option<Form>> {
        let stored = self.store.menu_state(turn.tenant.id, turn.conversation).await?;
        let Some(stored) = stored.and_then(|v| serde_json::from_value::<Stored>(v).ok()) else { return Ok(None) };
        // A retry of the turn that moved the form reads its message against the same step.
        Ok(if stored.turn == turn.id.0 { stored.before } else { stored.after })
    }

    async fn set_form(&self, turn: &Turn, before: Option<Form>, after: Option<Form>) -> anyhow::Result<()> {
        let stored = serde_json::to_value(Stored { turn: turn.id.0, before, after })?;
        let now = self.store.db_time(Utc::now());
        self.store.set_menu_state(turn.tenant.id, turn.conversation, Some(&stored), &turn.lease, now).await?;
        Ok(())
    }

    async fn call(&self, turn: &Turn, tool: &str, input: Value) -> anyhow::Result<Outcome> {
        let tool = self
            .tools
            .iter()
            .find(|t| t.spec().name == tool)
            .ok_or_else(|| anyhow::anyhow!("the merchant menu needs the {tool} tool"))?;
        self.executor.execute(tool.as_ref(), &turn.call_context(None), &input).await
    }

    /// Whether the Pix provider needs the CPF or CNPJ of the customer at `phone` and nobody
    /// gave it yet.
    async fn needs_document(&self, turn: &Turn, phone: &PhoneE164) -> anyhow::Result<bool> {
        if !turn.tenant.settings.pix.as_ref().is_some_and(|pix| pix.requires_payer_document()) {
            return Ok(false);
        }
        Ok(self.store.payer_document_of_phone(turn.tenant.id, phone).await?.is_none())
    }

    /// The form's step after the customer's number (typed, or picked from the recent ones).
    async fn charge_to(
        &self,
        turn: &Turn,
        amount: Cents,
        phone: Option<PhoneE164>,
    ) -> anyhow::Result<(Option<OutboundMessage>, Option<Form>)> {
        Ok(match phone {
            Some(phone) if self.needs_document(turn, &phone).await? => {
                (Some(text(M::AskDocument)?), Some(Form::Document { amount, phone }))
            }
            Some(phone) => (Some(text(M::AskDescription)?), Some(Form::Description { amount, phone, document: None })),
            None => (Some(text(M::InvalidPhone)?), Some(Form::Phone { amount })),
        })
    }

    /// The reply to the turn's last message, and the form's place after it.
    async fn answer(&self, turn: &Turn, form: Option<Form>) -> anyhow::Result<(Option<OutboundMessage>, Option<Form>)> {
        let Some(last) = turn.messages.last() else { return Ok((Some(self.menu(turn, None)?), None)) };
        match last.reply_id.as_deref() {
            Some(NEW_CHARGE) => return Ok((Some(text(M::AskAmount)?), Some(Form::Amount))),
            Some(REFUND) => return Ok((Some(self.refund_list(turn).await?), None)),
            Some(WITHDRAW) => return Ok((Some(self.withdraw_list(turn).await?), None)),
            Some(TODAY) => return Ok((Some(self.charges_today(turn).await?), None)),
            Some(AGENDA) => return Ok((Some(self.agenda_today(turn).await?), None)),
            Some(id) => {
                if let Some(charge_id) = id.strip_prefix(REFUND_CHARGE).and_then(|c| c.parse().ok()) {
                    return Ok((
                        Some(self.ask_refund_amount(turn, charge_id).await?),
                        Some(Form::RefundAmount { charge_id }),
                    ));
                }
                if let Some(charge_id) = id.strip_prefix(REFUND_ALL).and_then(|c| c.parse().ok()) {
                    return Ok((self.propose_refund(turn, charge_id, None).await?, None));
                }
                if let Some(charge_id) = id.strip_prefix(WITHDRAW_CHARGE).and_then(|c| c.parse().ok()) {
                    return Ok((Some(self.withdraw(turn, charge_id).await?), None));
                }
                // A customer picked for the charge being filled in, as if their number were typed.
                if let (Some(digits), Some(Form::Phone { amount })) = (id.strip_prefix(CHARGE_TO), &form) {
                    return self.charge_to(turn, *amount, parse_phone(&format!("+{digits}"))).await;
                }
                return Ok((Some(self.menu(turn, None)?), None));
            }
            None => {}
        }
        let body = last.body.as_deref().unwrap_or("").trim();
        if matches!(normalize_text(body).as_str(), "cancelar" | "menu" | "sair") {
            return Ok((Some(self.menu(turn, None)?), None));
        }
        Ok(match form {
            None => (Some(self.menu(turn, None)?), None),
            Some(Form::Amount) => match amount(body) {
                Ok(amount) => (Some(self.ask_phone(turn).await?), Some(Form::Phone { amount })),
                Err(problem) => (Some(text(M::InvalidAmount { problem })?), Some(Form::Amount)),
            },
            Some(Form::Phone { amount }) => return self.charge_to(turn, amount, parse_phone(body)).await,
            Some(Form::Document { amount, phone }) => match PayerDocument::from_message(body) {
                Some(document) => (
                    Some(text(M::AskDescription)?),
                    Some(Form::Description { amount, phone, document: Some(document) }),
                ),
                None => (Some(text(M::InvalidDocument)?), Some(Form::Document { amount, phone })),
            },
            Some(Form::RefundAmount { charge_id }) => match amount(body) {
                Ok(amount) => (self.propose_refund(turn, charge_id, Some(amount)).await?, None),
                Err(problem) => (Some(text(M::InvalidAmount { problem })?), Some(Form::RefundAmount { charge_id })),
            },
            Some(Form::Description { amount, phone, document }) => {
                let description = FieldKind::Label.normalize(&json!(body)).ok();
                let description = description
                    .as_ref()
                    .and_then(Value::as_str)
                    .filter(|d| crate::agent::tools::check_charge(amount, d).is_ok());
                let Some(description) = description else {
                    let form = Form::Description { amount, phone, document };
                    return Ok((Some(text(M::InvalidDescription)?), Some(form)));
                };
                let mut input = json!({
                    "customer_phone": phone.as_str(),
                    "amount": amount.to_decimal(),
                    "description": description,
                });
                if let Some(document) = &document {
                    input["payer_document"] = json!(document.as_str());
                }
                match self.call(turn, "propose_charge", input).await? {
                    // The proposal's buttons are the reply, already queued.
                    Outcome::Executed(_) | Outcome::AlreadyDone(_) => (None, None),
                    Outcome::Failed { error, .. } => {
                        (Some(self.menu(turn, Some(merchant_text(M::ChargeRefused { reason: &error })?))?), None)
                    }
                    other => anyhow::bail!("proposing the charge failed: {other:?}"),
                }
            }
        })
    }
}

#[async_trait]
impl TurnHandler for MerchantMenu {
    async fn handle(&self, turn: &Turn) -> anyhow::Result<()> {
        let before = self.form(turn).await?;
        let (reply, after) = self.answer(turn, before.clone()).await?;
        if before.is_some() || after.is_some() {
            self.set_form(turn, before, after).await?;
        }
        if let Some(reply) = reply {
            self.replier.reply(turn, 0, reply);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merchants_type_phones_many_ways() {
        for raw in ["11 99999-0000", "(11) 99999-0000", "11999990000", "+55 11 99999-0000", "5511999990000"] {
            assert_eq!(parse_phone(raw).map(|p| p.as_str().to_owned()).as_deref(), Some("+5511999990000"), "{raw}");
        }
        for raw in ["", "abc", "123", "0800 123"] {
            assert_eq!(parse_phone(raw), None, "{raw}");
        }
    }

    #[test]
    fn the_form_round_trips_through_json() {
        let phone = PhoneE164::parse("+5511999990000").expect("phone");
        let document = PayerDocument::parse("529.982.247-25").ok();
        let form = Form::Description { amount: Cents(5000), phone, document };
        let stored = Stored { turn: 7, before: Some(Form::Amount), after: Some(form.clone()) };
        let back: Stored = serde_json::from_value(serde_json::to_value(&stored).expect("json")).expect("parse");
        assert_eq!(back.after, Some(form));
        assert_eq!(back.before, Some(Form::Amount));
    }
}
