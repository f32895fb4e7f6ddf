//! After a run has settled: the claims, checked from the database and from the fakes' own
//! records. Each broken one is a line in the run's violations.
//!
//! - every acknowledged inbound message is stored and belongs to a turn that completed (a dead
//!   turn is a violation: with ten attempts, nothing injected here should exhaust them);
//! - at most one appointment per customer, professional and start (cancelled ones included),
//!   and no two active ones overlap for a professional (a check behind the database's own
//!   constraints);
//! - at most one charge per confirmed action here, and at most one payment per charge at the
//!   provider, each recorded here;
//! - a charge paid at the provider is paid here, and announced exactly once to each party; a
//!   paid deposit's appointment is confirmed;
//! - a reminder at most once per booking, and a presence confirmed once;
//! - no message accepted twice by the Graph API for one outbox key, and none recorded as sent
//!   that Meta never accepted;
//! - every ledger row terminal (no call left running or with an unknown outcome);
//! - every model request had a well-formed history (the model fake's own check, taken by the
//!   campaign per run).

use std::collections::HashMap;
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::db::on;
use crate::run::{Cast, Ctx};

/// Waits until the tenant has no work left: no payment notification to process, no runnable or
/// running job, no ledger call in flight, no proposal aged past its expiry that the sweep has
/// not expired yet, no unsettled outbox row. `Some(what)` if it did not within `timeout`.
///
/// The checks are separate reads, so work can move from one table to the next between them (a
/// notification's processing queues the receipts, then closes the event): they go upstream
/// first, and it takes two quiet passes in a row.
pub async fn settle(ctx: &Ctx, cast: &Cast, timeout: Duration) -> anyhow::Result<Option<String>> {
    let checks = [
        ("payment events", "SELECT COUNT(*) FROM payment_events WHERE tenant_id = $1 AND processed_at IS NULL"),
        ("jobs", "SELECT COUNT(*) FROM jobs WHERE tenant_id = $1 AND state NOT IN ('completed', 'dead')"),
        (
            "ledger calls",
            "SELECT COUNT(*) FROM agent_tool_executions WHERE tenant_id = $1 AND status IN ('running', 'outcome_unknown')",
        ),
        (
            "aged proposals",
            "SELECT COUNT(*) FROM pending_actions WHERE tenant_id = $1 AND status = 'pending' AND expires_at <= created_at",
        ),
        (
            "withdrawals",
            "SELECT COUNT(*) FROM charges WHERE tenant_id = $1 AND status IN ('expired', 'cancelled') AND withdrawn_at IS NULL",
        ),
        ("refunds", "SELECT COUNT(*) FROM refunds WHERE tenant_id = $1 AND status = 'processing'"),
        (
            "outbox rows",
            "SELECT COUNT(*) FROM outbound_messages WHERE tenant_id = $1 AND status IN ('pending', 'sending', 'unknown')",
        ),
    ];
    let deadline = tokio::time::Instant::now() + timeout;
    let mut quiet = 0;
    loop {
        let mut busy = Vec::new();
        for (what, sql) in checks {
            let n = ctx.db.count(sql, cast.tenant).await?;
            if n > 0 {
                busy.push(format!("{n} {what}"));
            }
        }
        quiet = if busy.is_empty() { quiet + 1 } else { 0 };
        if quiet == 2 {
            return Ok(None);
        }
        if tokio::time::Instant::now() > deadline {
            return Ok(Some(format!("not settled after {timeout:?}: {}", busy.join(", "))));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

pub async fn check(ctx: &Ctx, cast: &Cast, acked: &[String]) -> anyhow::Result<Vec<String>> {
    let mut violations = Vec::new();
    inbound(ctx, cast, acked, &mut violations).await?;
    appointments(ctx, cast, &mut violations).await?;
    charges(ctx, cast, &mut violations).await?;
    refunds(ctx, cast, &mut violations).await?;
    reminders(ctx, cast, &mut violations).await?;
    sends(ctx, cast, &mut violations).await?;
    erasures(ctx, cast, acked, &mut violations).await?;
    Ok(violations)
}

/// A customer erased mid-conversation: nothing they sent before the erasure survives (each such
/// message dropped, or stored and erased with the rest), their erased conversation holds no
/// text, history, pending offer, live turn or recipient, and what they sent after it was
/// answered like anyone's (checked by `inbound`, their ids being `.after.` ones).
async fn erasures(ctx: &Ctx, cast: &Cast, acked: &[String], out: &mut Vec<String>) -> anyhow::Result<()> {
    if cast.erasee.is_none() {
        return Ok(());
    }
    let key = balcao::domain::PrivacyKey::derive(&balcao::domain::Secret::new(crate::meta::APP_SECRET));
    for id in acked.iter().filter(|id| id.contains(".erased.")) {
        let sql = "SELECT body FROM inbound_messages WHERE tenant_id = $1 AND provider_message_id = $2";
        let body: Option<Option<String>> = on!(&ctx.db, pool => sqlx::query_scalar(sql)
            .bind(cast.tenant).bind(key.message_id(id)).fetch_optional(pool).await?);
        if let Some(Some(body)) = body {
            out.push(format!("message {id}, sent before its sender's erasure, is stored: {body:?}"));
        }
    }
    let checks = [
        (
            "texts",
            "SELECT COUNT(*) FROM inbound_messages i JOIN conversations v ON v.id = i.conversation_id                    JOIN contacts c ON c.id = v.contact_id WHERE i.tenant_id = $1 AND c.erased_at IS NOT NULL                    AND (i.body IS NOT NULL OR i.transcript IS NOT NULL)",
        ),
        (
            "model history rows",
            "SELECT COUNT(*) FROM conversation_messages m JOIN conversations v ON v.id = m.conversation_id                    JOIN contacts c ON c.id = v.contact_id WHERE m.tenant_id = $1 AND c.erased_at IS NOT NULL",
        ),
        (
            "addressed replies",
            "SELECT COUNT(*) FROM outbound_messages o JOIN conversations v ON v.id = o.conversation_id                    JOIN contacts c ON c.id = v.contact_id WHERE o.tenant_id = $1 AND c.erased_at IS NOT NULL                    AND (o.to_wa_id IS NOT NULL OR o.status IN ('pending', 'sending', 'unknown'))",
        ),
        (
            "open offers",
            "SELECT COUNT(*) FROM pending_actions p JOIN conversations v ON v.id = p.conversation_id                    JOIN contacts c ON c.id = v.contact_id WHERE p.tenant_id = $1 AND c.erased_at IS NOT NULL                    AND p.status IN ('pending', 'confirmed')",
        ),
        (
            "live turns",
            "SELECT COUNT(*) FROM jobs j JOIN conversations v ON v.id = j.conversation_id                    JOIN contacts c ON c.id = v.contact_id WHERE j.tenant_id = $1 AND c.erased_at IS NOT NULL                    AND j.state IN ('available', 'running', 'retryable')",
        ),
    ];
    for (what, sql) in checks {
        let n = ctx.db.count(sql, cast.tenant).await?;
        if n > 0 {
            out.push(format!("{n} {what} of an erased customer survive"));
        }
    }
    Ok(())
}

async fn inbound(ctx: &Ctx, cast: &Cast, acked: &[String], out: &mut Vec<String>) -> anyhow::Result<()> {
    let sql = "SELECT i.provider_message_id, j.state, j.last_error FROM inbound_messages i \
               LEFT JOIN jobs j ON j.id = i.turn_id AND j.tenant_id = i.tenant_id WHERE i.tenant_id = $1";
    let rows: Vec<(String, Option<String>, Option<String>)> =
        on!(&ctx.db, pool => sqlx::query_as(sql).bind(cast.tenant).fetch_all(pool).await?);
    let stored: HashMap<&str, (Option<&str>, Option<&str>)> =
        rows.iter().map(|(id, state, error)| (id.as_str(), (state.as_deref(), error.as_deref()))).collect();
    // The servers store message ids hashed under the key derived from the app secret.
    let key = balcao::domain::PrivacyKey::derive(&balcao::domain::Secret::new(crate::meta::APP_SECRET));
    // An erased customer's messages from before their erasure are `erasures`' to check.
    for id in acked.iter().filter(|id| !id.contains(".erased.")) {
        match stored.get(key.message_id(id).as_str()) {
            None => out.push(format!("acknowledged message {id} is not stored")),
            Some((Some("completed"), _)) => {}
            Some((Some("dead"), reason)) => out.push(format!("message {id}'s turn is dead: {reason:?}")),
            Some((state, _)) => out.push(format!("message {id} belongs to no finished turn (job state {state:?})")),
        }
    }
    Ok(())
}

async fn appointments(ctx: &Ctx, cast: &Cast, out: &mut Vec<String>) -> anyhow::Result<()> {
    let sql =
        "SELECT id, contact_id, professional_id, starts_at, ends_at, status FROM appointments WHERE tenant_id = $1";
    type Row = (i64, i64, i64, DateTime<Utc>, DateTime<Utc>, String);
    let rows: Vec<Row> = on!(&ctx.db, pool => sqlx::query_as(sql).bind(cast.tenant).fetch_all(pool).await?);
    // Every row, cancelled ones too: a booking executed twice whose copy was later cancelled
    // is still a second execution (a move changes its row in place).
    let mut keys = HashMap::new();
    for (id, contact, professional, starts, _, _) in &rows {
        if let Some(other) = keys.insert((contact, professional, starts), id) {
            out.push(format!("appointments {other} and {id}: one customer booked twice at {starts}"));
        }
    }
    let active: Vec<&Row> = rows.iter().filter(|r| matches!(r.5.as_str(), "held" | "confirmed")).collect();
    ctx.coverage.add("appointments booked", rows.len() as u64);
    ctx.coverage.add("appointments cancelled", rows.iter().filter(|r| r.5 == "cancelled").count() as u64);
    for (i, a) in active.iter().enumerate() {
        for b in &active[i + 1..] {
            if a.2 == b.2 && a.3 < b.4 && b.3 < a.4 {
                out.push(format!("appointments {} and {} overlap for professional {}", a.0, b.0, a.2));
            }
        }
    }
    Ok(())
}

async fn charges(ctx: &Ctx, cast: &Cast, out: &mut Vec<String>) -> anyhow::Result<()> {
    // A paid deposit's booking stays confirmed, unless the customer cancelled it afterwards
    // (a cancellation decided after the payment: the deposit is the merchant's to keep).
    let sql = "SELECT c.id, c.action_id, c.provider_ref, c.status, c.customer_phone, a.status, \
                      EXISTS (SELECT 1 FROM pending_actions p WHERE p.tenant_id = c.tenant_id \
                              AND p.kind = 'cancellation' AND p.status = 'executed' \
                              AND CAST(p.payload->>'booking_id' AS TEXT) = CAST(c.appointment_id AS TEXT) \
                              AND p.decided_at >= c.paid_at) \
               FROM charges c LEFT JOIN appointments a ON a.id = c.appointment_id AND a.tenant_id = c.tenant_id \
               WHERE c.tenant_id = $1";
    /// Id, action, provider reference, status, customer phone, its deposit's appointment status,
    /// whether the customer cancelled that appointment after paying.
    type Row = (i64, Option<String>, Option<String>, String, String, Option<String>, bool);
    let rows: Vec<Row> = on!(&ctx.db, pool => sqlx::query_as(sql).bind(cast.tenant).fetch_all(pool).await?);
    let mut per_action = HashMap::new();
    for (id, action, ..) in &rows {
        if let Some(action) = action
            && let Some(other) = per_action.insert(action, id)
        {
            out.push(format!("charges {other} and {id} for one action {action}"));
        }
    }
    // One payment per charge at the provider, by its `externalReference` (the charge's txid):
    // a description repeats when a slot is held again after its first hold ended.
    let payments = cast.asaas.payments();
    let mut per_charge: HashMap<&str, Vec<&str>> = HashMap::new();
    for payment in &payments {
        let reference = payment["externalReference"].as_str().unwrap_or_default();
        per_charge.entry(reference).or_default().push(payment["description"].as_str().unwrap_or_default());
    }
    for (reference, descriptions) in per_charge {
        if descriptions.len() > 1 {
            out.push(format!(
                "{} payments at the provider for one charge {reference} ({})",
                descriptions.len(),
                descriptions[0]
            ));
        }
    }
    let sent = ctx.graph.sent(&cast.number);
    let told = |to: &str, needle: &str| sent.iter().filter(|s| s.to == to && s.text().contains(needle)).count();
    for payment in &payments {
        let id = payment["id"].as_str().unwrap_or_default();
        let Some((charge, _, _, status, phone, appointment, cancelled_after)) =
            rows.iter().find(|r| r.2.as_deref() == Some(id))
        else {
            out.push(format!("payment {id} at the provider is recorded by no charge"));
            continue;
        };
        // Withdrawn at the provider exactly when it can no longer be paid here.
        let deleted = payment["deleted"] == true;
        let closed = matches!(status.as_str(), "expired" | "cancelled");
        ctx.coverage.add("charges withdrawn", u64::from(deleted));
        // Received, and maybe given back since.
        let received = matches!(
            payment["status"].as_str(),
            Some("RECEIVED" | "REFUNDED" | "REFUND_REQUESTED" | "REFUND_IN_PROGRESS")
        );
        if deleted != (closed && !received) {
            out.push(format!("charge {charge} is {status} here, its payment {id} deleted at the provider: {deleted}"));
        }
        if !received {
            continue;
        }
        let deposit = payment["description"].as_str().is_some_and(|d| d.starts_with("Sinal"));
        let customer = phone.trim_start_matches('+');
        // Paid just as its hold ended (the customer cancelled it, or it expired, while the Pix
        // was on its way): nothing is booked, the money is owed back, and each side is told so.
        let late = deposit
            && appointment.as_deref() == Some("cancelled")
            && matches!(status.as_str(), "refund_due" | "partially_refunded" | "refunded");
        if late {
            ctx.coverage.add("deposits paid after their hold ended", 1);
            let staff_told = sent
                .iter()
                .filter(|s| s.to == cast.staff && s.text().contains(&format!("(cobrança nº {charge})")))
                .filter(|s| s.text().contains("depois que a pré-reserva deixou de valer"))
                .count();
            let customer_told = told(customer, "mas a pré-reserva");
            if (customer_told, staff_told) != (1, 1) {
                out.push(format!(
                    "deposit {charge} paid after its hold ended: told {customer_told}× to the customer and \
                     {staff_told}× to the merchant"
                ));
            }
            continue;
        }
        let (what, to_customer, to_staff) = if deposit {
            ("deposits paid", "Recebemos o sinal", "Sinal pago")
        } else {
            ("charges paid", "Recebemos seu pagamento", "Cobrança paga")
        };
        let paid_here = matches!(status.as_str(), "paid" | "partially_refunded" | "refunded");
        ctx.coverage.add(what, u64::from(paid_here));
        match (status.as_str(), told(customer, to_customer), told(&cast.staff, to_staff)) {
            (_, 1, 1) if paid_here => {}
            (status, to_customer, to_staff) => out.push(format!(
                "charge {charge} paid at the provider: {status} here, announced {to_customer}× to the customer \
                 and {to_staff}× to the merchant"
            )),
        }
        ctx.coverage.add("deposit bookings cancelled after payment", u64::from(deposit && *cancelled_after));
        let kept = appointment.as_deref() == Some("confirmed")
            || (appointment.as_deref() == Some("cancelled") && *cancelled_after);
        if deposit && !kept {
            out.push(format!("deposit {charge} paid, its appointment {appointment:?}"));
        }
    }
    Ok(())
}

/// Refunds: each made once at the provider (our id in its description), never more than was
/// paid, settled here as the provider says, the charge's sums and status following, and each
/// done refund told once to the customer and once to the staff.
async fn refunds(ctx: &Ctx, cast: &Cast, out: &mut Vec<String>) -> anyhow::Result<()> {
    // One request (one staff message), one offer of its money, however often its turn ran.
    let sql = "SELECT proposed_by, kind, COUNT(*) FROM pending_actions \
               WHERE tenant_id = $1 AND kind IN ('charge', 'refund') AND status <> 'superseded' \
               AND proposed_by IS NOT NULL \
               GROUP BY proposed_by, kind HAVING COUNT(*) > 1";
    let offered: Vec<(Option<String>, String, i64)> =
        on!(&ctx.db, pool => sqlx::query_as(sql).bind(cast.tenant).fetch_all(pool).await?);
    for (message, kind, n) in offered {
        out.push(format!("{n} {kind} offers for one request ({message:?})"));
    }
    let sql = "SELECT r.id, r.charge_id, r.refund_id, r.status, r.amount_cents, c.provider_ref \
               FROM refunds r JOIN charges c ON c.id = r.charge_id AND c.tenant_id = r.tenant_id \
               WHERE r.tenant_id = $1";
    type Row = (i64, i64, String, String, i64, Option<String>);
    let rows: Vec<Row> = on!(&ctx.db, pool => sqlx::query_as(sql).bind(cast.tenant).fetch_all(pool).await?);
    let payments = cast.asaas.payments();
    for payment in &payments {
        let id = payment["id"].as_str().unwrap_or_default();
        let made = payment["refunds"].as_array().cloned().unwrap_or_default();
        let given: f64 = made.iter().filter(|r| r["status"] != "CANCELLED").filter_map(|r| r["value"].as_f64()).sum();
        if given > payment["value"].as_f64().unwrap_or_default() + 0.001 {
            out.push(format!("payment {id}: {given} refunded of {}", payment["value"]));
        }
        for refund in &made {
            let text = refund["description"].as_str().unwrap_or_default();
            let ours: Vec<&Row> = rows.iter().filter(|r| text.contains(r.2.as_str())).collect();
            if ours.len() != 1 {
                out.push(format!("refund {text:?} of payment {id} matches {} refunds here", ours.len()));
            }
        }
        for row in rows.iter().filter(|r| r.5.as_deref() == Some(id)) {
            let at_provider: Vec<&serde_json::Value> = made
                .iter()
                .filter(|r| r["description"].as_str().unwrap_or_default().contains(row.2.as_str()))
                .collect();
            let status = at_provider.first().and_then(|r| r["status"].as_str());
            if at_provider.len() > 1 {
                out.push(format!("refund {} made {}× at the provider", row.0, at_provider.len()));
            }
            match (row.3.as_str(), status) {
                ("done", Some("DONE")) | ("failed", None | Some("CANCELLED")) => {}
                (here, there) => out.push(format!("refund {} is {here} here and {there:?} at the provider", row.0)),
            }
        }
    }
    let sql = "SELECT id, amount_cents, refunded_cents, refund_reserved_cents, status, customer_phone \
               FROM charges WHERE tenant_id = $1";
    type Charge = (i64, i64, i64, i64, String, String);
    let charges: Vec<Charge> = on!(&ctx.db, pool => sqlx::query_as(sql).bind(cast.tenant).fetch_all(pool).await?);
    let sent = ctx.graph.sent(&cast.number);
    let told = |to: &str, needle: &str| sent.iter().filter(|s| s.to == to && s.text().contains(needle)).count();
    for (id, amount, refunded, reserved, status, phone) in &charges {
        let done: Vec<&Row> = rows.iter().filter(|r| r.1 == *id && r.3 == "done").collect();
        let sum: i64 = done.iter().map(|r| r.4).sum();
        let held: i64 = rows.iter().filter(|r| r.1 == *id && r.3 != "failed").map(|r| r.4).sum();
        ctx.coverage.add("refunds done", done.len() as u64);
        let expected = match sum {
            0 => status.as_str(),
            s if s == *amount => "refunded",
            _ => "partially_refunded",
        };
        if (*refunded, *reserved) != (sum, held) || status != expected || sum > *amount {
            out.push(format!(
                "charge {id} ({status}, {amount}): {refunded} refunded and {reserved} reserved here, refunds done {sum}, held {held}"
            ));
        }
        // One merchant charge per run is refunded, so the customer's count is this charge's.
        let (to_customer, to_staff) = (
            told(phone.trim_start_matches('+'), "devolveu R$"),
            told(&cast.staff, &format!("da cobrança nº {id} voltaram")),
        );
        if !done.is_empty() && (to_customer != done.len() || to_staff != done.len()) {
            out.push(format!(
                "charge {id}: {} refunds done, told {to_customer}× to the customer and {to_staff}× to the staff",
                done.len()
            ));
        }
    }
    Ok(())
}

/// A reminder at most once per customer (each run books at most one time a reminder comes due
/// for), and its "Confirmo" answered once.
async fn reminders(ctx: &Ctx, cast: &Cast, out: &mut Vec<String>) -> anyhow::Result<()> {
    let sent = ctx.graph.sent(&cast.number);
    for customer in &cast.customers {
        let count = |needle: &str| sent.iter().filter(|s| &s.to == customer && s.text().contains(needle)).count();
        let (reminded, attending) = (count("Lembrete da"), count("Sua presença em"));
        if reminded > 1 || attending > 1 {
            out.push(format!("{customer}: {reminded} reminders, presence confirmed {attending}×"));
        }
    }
    let sql = "SELECT COUNT(*) FROM pending_actions WHERE tenant_id = $1 AND kind = 'attendance' \
               AND status IN ('confirmed', 'executed', 'declined')";
    ctx.coverage.add("reminders answered", ctx.db.count(sql, cast.tenant).await? as u64);
    Ok(())
}

async fn sends(ctx: &Ctx, cast: &Cast, out: &mut Vec<String>) -> anyhow::Result<()> {
    // The outbox first: a row sent by then was accepted by then, so the fake's later record
    // holds it.
    let sql = "SELECT idempotency_key, status FROM outbound_messages WHERE tenant_id = $1";
    let rows: Vec<(String, String)> =
        on!(&ctx.db, pool => sqlx::query_as(sql).bind(cast.tenant).fetch_all(pool).await?);
    let sent = ctx.graph.sent(&cast.number);
    ctx.coverage.add("replies sent", sent.len() as u64);
    let mut per_key: HashMap<&str, usize> = HashMap::new();
    for s in &sent {
        match s.key.as_deref() {
            Some(key) => *per_key.entry(key).or_default() += 1,
            None => out.push(format!("a message to {} went out without our key: {}", s.to, s.body)),
        }
    }
    for (key, n) in &per_key {
        if *n > 1 {
            out.push(format!("message {key} accepted {n}× by the Graph API"));
        }
    }
    let outbox: HashMap<&str, &str> = rows.iter().map(|(k, s)| (k.as_str(), s.as_str())).collect();
    for (key, status) in &outbox {
        if matches!(*status, "sent" | "delivered" | "read") && !per_key.contains_key(key) {
            out.push(format!("message {key} recorded as sent, never accepted by the Graph API"));
        }
    }
    for key in per_key.keys() {
        if !outbox.contains_key(key) {
            out.push(format!("the Graph API accepted {key}, which no outbox row holds"));
        }
    }
    Ok(())
}
