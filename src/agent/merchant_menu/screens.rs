//! The staff menu's screens that read the business's books: today's charges and agenda, and
//! the lists a refund or a cancellation starts from; and the two calls those lists lead to.

use chrono::{TimeDelta, Utc};
use serde_json::json;

use super::{CHARGE_TO, MerchantMenu, REFUND_ALL, REFUND_CHARGE, WITHDRAW_CHARGE};
use crate::domain::{Cents, PhoneE164};
use crate::jobs::Turn;
use crate::ledger::Outcome;
use crate::messages::{MerchantText as M, merchant_text, when_at};
use crate::money::charges::{Charge, REFUNDABLE_STATUSES};
use crate::store::{ChargeStore, TenantStore};
use crate::whatsapp::message::{
    BUTTON_TITLE_MAX, LIST_BUTTON_MAX, LIST_ROW_DESCRIPTION_MAX, LIST_ROW_TITLE_MAX, LIST_ROWS_MAX, clip,
};
use crate::whatsapp::{ListRow, ListSection, OutboundMessage, ReplyButton};

/// How far back the refund and cancellation lists look.
const LOOK_BACK: TimeDelta = TimeDelta::days(30);
/// Whom "Nova cobrança" offers: the customers who wrote within WhatsApp's 24-hour window (a
/// charge to them goes with its Pix code, not as a template).
const RECENT: TimeDelta = TimeDelta::hours(24);

pub(super) fn row(id: String, title: String, description: Option<String>) -> anyhow::Result<ListRow> {
    Ok(ListRow {
        id,
        title: clip(&title, LIST_ROW_TITLE_MAX),
        description: description.map(|d| clip(&d, LIST_ROW_DESCRIPTION_MAX)),
    })
}

pub(super) fn list(body: String, button: &str, rows: Vec<ListRow>) -> anyhow::Result<OutboundMessage> {
    let section = ListSection { title: None, rows };
    Ok(OutboundMessage::list(body, None, clip(button, LIST_BUTTON_MAX), vec![section])?)
}

/// A charge as a list row: its number and amount, then who and what.
fn charge_row(prefix: &str, charge: &Charge, amount: Cents) -> anyhow::Result<ListRow> {
    row(
        format!("{prefix}{}", charge.id),
        format!("nº {} — {amount}", charge.id),
        Some(format!("{} — {}", charge.customer_phone, charge.description)),
    )
}

impl MerchantMenu {
    /// "Para quem é a cobrança?": the customers who wrote in the last 24 hours as a list, the
    /// latest first, each with the time they wrote in the tenant's zone; typing a number works
    /// too. No one wrote: the question alone.
    pub(super) async fn ask_phone(&self, turn: &Turn) -> anyhow::Result<OutboundMessage> {
        let staff = self.store.staff(turn.tenant.id).await?;
        let since = self.store.db_time(Utc::now()) - RECENT;
        let rows = self
            .store
            .recent_customers(turn.tenant.id, since, LIST_ROWS_MAX as i64 + staff.len() as i64)
            .await?
            .into_iter()
            .filter(|c| !staff.includes(PhoneE164::parse(&c.wa_id).ok().as_ref()))
            .take(LIST_ROWS_MAX)
            .map(|c| {
                let number = format!("+{}", c.wa_id);
                let when = when_at(turn.tenant.timezone, c.last_at);
                let title = c.profile_name.clone().unwrap_or_else(|| number.clone());
                let line = merchant_text(M::RecentCustomer { number: &number, when: &when })?;
                row(format!("{CHARGE_TO}{}", c.wa_id), title, Some(line))
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        if rows.is_empty() {
            return Ok(OutboundMessage::text(merchant_text(M::AskPhone)?)?);
        }
        list(merchant_text(M::AskPhoneOrPick)?, &merchant_text(M::RecentButton)?, rows)
    }

    pub(super) async fn charges_today(&self, turn: &Turn) -> anyhow::Result<OutboundMessage> {
        let tz = turn.tenant.timezone;
        let today = Utc::now().with_timezone(&tz).date_naive();
        let since = today
            .and_hms_opt(0, 0, 0)
            .and_then(|t| t.and_local_timezone(tz).earliest())
            .map_or_else(Utc::now, |t| t.with_timezone(&Utc));
        let charges = self.store.charges(turn.tenant.id, None, since, 50).await?;
        if charges.is_empty() {
            return self.menu(turn, Some(merchant_text(M::NoCharges)?));
        }
        let lines = charges
            .iter()
            .map(|c| {
                merchant_text(M::ChargeLine {
                    amount: &c.amount().to_string(),
                    customer: &c.customer_phone,
                    description: &c.description,
                    status: &c.status,
                })
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        let total = Cents(charges.iter().filter(|c| c.status == "paid").map(|c| c.amount_cents).sum()).to_string();
        self.menu(turn, Some(merchant_text(M::ChargesToday { lines, total })?))
    }

    pub(super) async fn agenda_today(&self, turn: &Turn) -> anyhow::Result<OutboundMessage> {
        let tz = turn.tenant.timezone;
        let today = Utc::now().with_timezone(&tz).date_naive();
        let rows = crate::agent::tools::agenda_of(&self.store, &turn.tenant, today)
            .await
            .map_err(|e| anyhow::anyhow!("agenda failed: {e:?}"))?;
        if rows.is_empty() {
            return self.menu(turn, Some(merchant_text(M::NoAgenda)?));
        }
        let lines = rows
            .iter()
            .map(|a| {
                let when = a["starts_at"]
                    .as_str()
                    .and_then(|s| chrono::DateTime::parse_from_rfc3339(s).ok())
                    .map(|t| when_at(tz, t.with_timezone(&Utc)))
                    .unwrap_or_default();
                format!(
                    "{when} — {} com {} — {}",
                    a["service"].as_str().unwrap_or("?"),
                    a["professional"].as_str().unwrap_or("?"),
                    a["customer"].as_str().or(a["customer_phone"].as_str()).unwrap_or("?")
                )
            })
            .collect();
        self.menu(turn, Some(merchant_text(M::Agenda { lines })?))
    }

    /// The newest charges of the last 30 days in `statuses`, at most a list's worth.
    async fn recent(&self, turn: &Turn, statuses: &[&str]) -> anyhow::Result<Vec<Charge>> {
        let since = Utc::now() - LOOK_BACK;
        let mut found = Vec::new();
        for status in statuses {
            found.extend(self.store.charges(turn.tenant.id, Some(status), since, LIST_ROWS_MAX as i64).await?);
        }
        found.sort_by(|a, b| b.created_at.cmp(&a.created_at).then(b.id.cmp(&a.id)));
        found.truncate(LIST_ROWS_MAX);
        Ok(found)
    }

    /// "Devolver um Pix": the paid charges that still have money to give back.
    pub(super) async fn refund_list(&self, turn: &Turn) -> anyhow::Result<OutboundMessage> {
        let charges = self.recent(turn, &REFUNDABLE_STATUSES).await?;
        let rows = charges
            .iter()
            .filter(|c| c.refundable().0 > 0)
            .map(|c| charge_row(REFUND_CHARGE, c, c.refundable()))
            .collect::<anyhow::Result<Vec<_>>>()?;
        if rows.is_empty() {
            return self.menu(turn, Some(merchant_text(M::NothingToRefund)?));
        }
        list(merchant_text(M::ChooseRefund)?, &merchant_text(M::ChargesButton)?, rows)
    }

    /// "Cancelar cobrança": the charges still waiting for payment.
    pub(super) async fn withdraw_list(&self, turn: &Turn) -> anyhow::Result<OutboundMessage> {
        let charges = self.recent(turn, &["pending"]).await?;
        if charges.is_empty() {
            return self.menu(turn, Some(merchant_text(M::NothingToCancel)?));
        }
        let rows =
            charges.iter().map(|c| charge_row(WITHDRAW_CHARGE, c, c.amount())).collect::<anyhow::Result<Vec<_>>>()?;
        list(merchant_text(M::ChooseCancel)?, &merchant_text(M::ChargesButton)?, rows)
    }

    /// How much of charge `id` to give back: everything (a button) or a typed amount.
    pub(super) async fn ask_refund_amount(&self, turn: &Turn, id: i64) -> anyhow::Result<OutboundMessage> {
        let charge = self.store.charge(turn.tenant.id, id).await?;
        let Some(refundable) = charge.map(|c| c.refundable()).filter(|r| r.0 > 0) else {
            return self.menu(turn, Some(merchant_text(M::NothingToRefund)?));
        };
        let all = refundable.to_string();
        let button = ReplyButton {
            id: format!("{REFUND_ALL}{id}"),
            title: clip(&merchant_text(M::RefundAllButton { amount: &all })?, BUTTON_TITLE_MAX),
        };
        Ok(OutboundMessage::buttons(
            merchant_text(M::AskRefundAmount { number: id, amount: &all })?,
            None,
            vec![button],
        )?)
    }

    /// Proposes the refund of `amount` (everything left when none) of charge `id`; `None` when
    /// the proposal's buttons are the reply (already queued).
    pub(super) async fn propose_refund(
        &self,
        turn: &Turn,
        id: i64,
        amount: Option<Cents>,
    ) -> anyhow::Result<Option<OutboundMessage>> {
        let mut input = json!({ "charge_id": id });
        if let Some(amount) = amount {
            input["amount"] = json!(amount.to_decimal());
        }
        match self.call(turn, "propose_refund", input).await? {
            Outcome::Executed(_) | Outcome::AlreadyDone(_) => Ok(None),
            Outcome::Failed { error, .. } => {
                Ok(Some(self.menu(turn, Some(merchant_text(M::RefundRefused { reason: &error })?))?))
            }
            other => anyhow::bail!("proposing the refund failed: {other:?}"),
        }
    }

    /// Cancels pending charge `id` (closed here now; withdrawn at the provider by the sweep).
    pub(super) async fn withdraw(&self, turn: &Turn, id: i64) -> anyhow::Result<OutboundMessage> {
        let body = match self.call(turn, "cancel_pix_charge", json!({ "charge_id": id })).await? {
            Outcome::Executed(_) | Outcome::AlreadyDone(_) => merchant_text(M::ChargeCancelled { number: id })?,
            Outcome::Failed { .. } => merchant_text(M::NotCancelled { number: id })?,
            other => anyhow::bail!("cancelling the charge failed: {other:?}"),
        };
        self.menu(turn, Some(body))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_charge_row_fits_whatsapp_limits() {
        let charge_row = row("m:refund:123456".into(), "nº 123456 — R$ 12.345,67".into(), Some("x".repeat(200)));
        let charge_row = charge_row.expect("a row");
        assert!(charge_row.title.chars().count() <= LIST_ROW_TITLE_MAX);
        assert!(charge_row.description.is_some_and(|d| d.chars().count() <= LIST_ROW_DESCRIPTION_MAX));
    }
}
