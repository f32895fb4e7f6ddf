//! The merchant's tools: `propose_charge` proposes a Pix charge (confirmed only by the
//! merchant's button), `list_charges` and `agenda` read. Only the merchant handler is given
//! them, and `propose_charge` checks the caller is staff again, so no customer reaches them.
//!
//! `propose_charge` is keyed per turn (the trigger message plus amount, customer and
//! description): a merchant may charge the same customer the same amount twice in two
//! requests, while the same request repeated by a retry or a duplicated call proposes once.

use async_trait::async_trait;
use chrono::{NaiveDate, TimeDelta, TimeZone, Utc};
use serde_json::{Value, json};

use crate::actions::{ActionPayload, Proposal, Proposer};
use crate::appointments::local;
use crate::domain::{Cents, PayerDocument, PhoneE164};
use crate::ledger::{Effect, FieldKind, FieldSpec, KeyPolicy, Reach, Tool, ToolCall, ToolFailure, ToolSpec};
use crate::messages::{ActionText, ChargeVia, action_text};
use crate::money::charges::{choose_via, payer_document_required};
use crate::store::{AgendaStore, CatalogStore, ChargeStore, InboundStore, Store, TenantStore};

/// A charge's description, as Pix and WhatsApp show it.
pub const DESCRIPTION_MAX: usize = 140;

fn refusal(text: ActionText<'_>, reason: &str) -> ToolFailure {
    let message = action_text(text).unwrap_or_else(|e| e.to_string());
    ToolFailure::permanent(message, json!({ "reason": reason }))
}

pub struct ProposeCharge {
    pub proposer: Proposer,
}

pub static PROPOSE_CHARGE: ToolSpec = ToolSpec {
    name: "propose_charge",
    description: "Prepares a Pix charge to a customer. Nothing is sent yet: the merchant receives Confirmar/Cancelar \
                  buttons and only the button sends the charge (no text confirms money).",
    effect: Effect::Write {
        policy: KeyPolicy::PerTurn,
        on_conflict: "This charge was already proposed in this request.",
        reach: Reach::Outside,
    },
    fields: &[
        FieldSpec {
            name: "customer_phone",
            kind: FieldKind::Phone,
            required: true,
            identity: true,
            description: "The customer's WhatsApp number with country code, like +5511999990000.",
        },
        FieldSpec {
            name: "amount",
            kind: FieldKind::Money,
            required: true,
            identity: true,
            description: "Amount in BRL as a decimal, like 50.00.",
        },
        FieldSpec {
            name: "description",
            kind: FieldKind::Label,
            required: true,
            identity: true,
            description: "What the charge is for, at most 140 characters.",
        },
        FieldSpec {
            name: "payer_document",
            kind: FieldKind::Document,
            required: false,
            identity: false,
            description: "The customer's CPF or CNPJ. Some Pix providers require it: when the result says \
                          payer_document_required, ask the merchant for it and propose again with it.",
        },
    ],
};

/// Checks a proposed charge before it is offered; shared with the guided merchant menu.
pub(crate) fn check_charge(amount: Cents, description: &str) -> Result<(), ToolFailure> {
    if amount.0 <= 0 {
        return Err(ToolFailure::permanent("amount must be greater than zero", json!({ "reason": "invalid_amount" })));
    }
    if description.chars().count() > DESCRIPTION_MAX {
        return Err(ToolFailure::permanent(
            format!("description must be at most {DESCRIPTION_MAX} characters"),
            json!({ "reason": "invalid_description" }),
        ));
    }
    Ok(())
}

#[async_trait]
impl Tool for ProposeCharge {
    fn spec(&self) -> &'static ToolSpec {
        &PROPOSE_CHARGE
    }

    async fn run(&self, call: &ToolCall<'_>) -> Result<Value, ToolFailure> {
        let ctx = call.ctx;
        let store = &self.proposer.store;
        let contact =
            store.conversation_contact(ctx.tenant.id, ctx.conversation).await.map_err(ToolFailure::storage)?;
        let staff = store
            .is_staff(ctx.tenant.id, contact.wa_id.as_ref())
            .await
            .map_err(|e| ToolFailure::Transient(e.to_string()))?;
        if !staff {
            return Err(ToolFailure::permanent(
                "only the business's staff can charge",
                json!({ "reason": "not_staff" }),
            ));
        }
        let phone = call.args.str("customer_phone").and_then(|p| PhoneE164::parse(p).ok());
        let amount = call.args.str("amount").and_then(|a| Cents::parse_brl(a).ok());
        let (Some(phone), Some(amount), Some(description)) = (phone, amount, call.args.str("description")) else {
            return Err(ToolFailure::permanent("invalid charge", Value::Null));
        };
        check_charge(amount, description)?;
        if ctx.tenant.settings.pix.is_none() {
            return Err(refusal(ActionText::PixNotConfigured, "pix_not_configured"));
        }
        // Outside the 24-hour window only a template reaches the customer: say so now, not
        // after the merchant confirmed.
        let customer =
            store.conversation_for_phone(ctx.tenant.id, &phone, ctx.now).await.map_err(ToolFailure::storage)?;
        let last = store.last_inbound_at(ctx.tenant.id, customer).await.map_err(ToolFailure::storage)?;
        let Some(via) = choose_via(ctx.tenant, last, ctx.now) else {
            return Err(refusal(ActionText::OutsideWindow, "outside_window"));
        };
        // Normalized already: a malformed one went back to the model as an input error.
        let payer_document = call.args.str("payer_document").and_then(|d| PayerDocument::parse(d).ok());
        let needs_document = ctx.tenant.settings.pix.as_ref().is_some_and(|pix| pix.requires_payer_document());
        if needs_document && payer_document.is_none() {
            let known = store.conversation_contact(ctx.tenant.id, customer).await.map_err(ToolFailure::storage)?;
            if known.payer_document.is_none() {
                return Err(payer_document_required());
            }
        }
        let amount_text = amount.to_string();
        let as_template = via == ChargeVia::Template;
        let offer =
            ActionText::OfferCharge { amount: &amount_text, customer: phone.as_str(), description, as_template };
        let text = action_text(offer).map_err(|e| ToolFailure::Transient(e.to_string()))?;
        let payload = ActionPayload::Charge {
            customer_phone: phone,
            amount,
            description: description.to_owned(),
            payer_document,
        };
        self.proposer.propose(call, Proposal::new(payload, text, ctx.now)).await
    }
}

pub struct ListCharges {
    pub store: Store,
}

pub(super) static LIST_CHARGES: ToolSpec = ToolSpec {
    name: "list_charges",
    description: "The business's Pix charges of the last 30 days, newest first, optionally of one status \
                  (pending, paid, expired, cancelled, refund_due: paid too late, to give back, partially_refunded, \
                  refunded).",
    effect: Effect::Read,
    fields: &[FieldSpec {
        name: "status",
        kind: FieldKind::Text,
        required: false,
        identity: false,
        description: "pending | paid | expired | cancelled | refund_due | partially_refunded | refunded",
    }],
};

#[async_trait]
impl Tool for ListCharges {
    fn spec(&self) -> &'static ToolSpec {
        &LIST_CHARGES
    }

    async fn run(&self, call: &ToolCall<'_>) -> Result<Value, ToolFailure> {
        let ctx = call.ctx;
        let status = call.args.str("status");
        if let Some(s) = status
            && !matches!(
                s,
                "pending" | "paid" | "expired" | "cancelled" | "refund_due" | "partially_refunded" | "refunded"
            )
        {
            return Err(ToolFailure::permanent(format!("unknown status {s:?}"), Value::Null));
        }
        let since = ctx.now - TimeDelta::days(30);
        let charges = self.store.charges(ctx.tenant.id, status, since, 50).await.map_err(ToolFailure::storage)?;
        let total: i64 = charges.iter().filter(|c| c.status == "paid").map(|c| c.amount_cents).sum();
        Ok(json!({
            "charges": charges.iter().map(|c| c.to_json()).collect::<Vec<_>>(),
            "paid_total": Cents(total).to_decimal(),
        }))
    }
}

pub struct Agenda {
    pub store: Store,
}

pub(super) static AGENDA: ToolSpec = ToolSpec {
    name: "agenda",
    description: "The business's appointments on one day (in its time zone), with customer, service and professional.",
    effect: Effect::Read,
    fields: &[FieldSpec {
        name: "date",
        kind: FieldKind::Date,
        required: true,
        identity: false,
        description: "YYYY-MM-DD",
    }],
};

/// The appointments of `date` in the tenant's zone, as the merchant reads them.
pub(crate) async fn agenda_of(
    store: &Store,
    tenant: &crate::tenant::Tenant,
    date: NaiveDate,
) -> Result<Vec<Value>, ToolFailure> {
    let tz = tenant.timezone;
    let start = |d: NaiveDate| {
        d.and_hms_opt(0, 0, 0).and_then(|t| tz.from_local_datetime(&t).earliest()).map(|t| t.with_timezone(&Utc))
    };
    let (Some(from), Some(to)) = (start(date), date.succ_opt().and_then(start)) else {
        return Err(ToolFailure::permanent("invalid date", Value::Null));
    };
    let rows = store.agenda(tenant.id, from, to).await.map_err(ToolFailure::storage)?;
    let (services, professionals) = store.catalog(tenant.id).await.map_err(ToolFailure::storage)?;
    Ok(rows
        .iter()
        .map(|(a, name, phone)| {
            json!({
                "booking_id": a.id,
                "starts_at": local(tz, a.starts_at),
                "service": services.iter().find(|s| s.id == a.service_id).map(|s| s.name.as_str()),
                "professional": professionals.iter().find(|p| p.id == a.professional_id).map(|p| p.name.as_str()),
                "customer": name,
                "customer_phone": phone,
                "status": a.status,
            })
        })
        .collect())
}

#[async_trait]
impl Tool for Agenda {
    fn spec(&self) -> &'static ToolSpec {
        &AGENDA
    }

    async fn run(&self, call: &ToolCall<'_>) -> Result<Value, ToolFailure> {
        let date = call
            .args
            .str("date")
            .and_then(|d| NaiveDate::parse_from_str(d, "%Y-%m-%d").ok())
            .ok_or_else(|| ToolFailure::permanent("date must be YYYY-MM-DD", Value::Null))?;
        Ok(json!({ "date": date.to_string(), "appointments": agenda_of(&self.store, call.ctx.tenant, date).await? }))
    }
}
