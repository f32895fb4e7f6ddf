//! The second factor behind a right password: a TOTP code checked under a throttle per admin,
//! and the owner told when someone who has the password is guessing codes.
//!
//! Invariants:
//! - only an attempt whose password matched reaches this throttle, so strangers cannot use it
//!   to lock the owner out; its wrong codes are counted per admin, from every source alike (a
//!   guesser spread over many addresses is one guesser here), each written before its code is
//!   checked so parallel guesses see each other, and a refused one is never written;
//! - an empty code is not a guess: it is refused and not counted;
//! - a throttled code is answered as a wrong login, and counted as one: answering otherwise
//!   would tell a guesser that the password was right;
//! - the owner is told once between two of their logins, when the wrong codes reach the free
//!   ones: on WhatsApp, at the staff number the admin gave (`balcao admin add --phone`), if it
//!   is one of a tenant's staff, under a key of their last login (queued once, whichever code
//!   came first); and in the console, after their next login, with every wrong code since the
//!   login before.

use chrono::{DateTime, TimeDelta, Utc};

use super::throttle::{self, TOTP};
use crate::domain::TotpSecret;
use crate::http::AppState;
use crate::messages::{Console, ConsoleText, render, when_at};
use crate::store::{AdminRecord, AdminStore, LoginStore, OutboxStore, Tally, TenantRef, TenantStore};
use crate::whatsapp::OutboundMessage;

/// What the code said.
pub enum Code {
    Accepted,
    Wrong,
    /// Too many wrong codes lately: wait this long.
    Throttled(TimeDelta),
}

/// Checks `code` for `admin`, whose password matched, and whose TOTP secret is `secret`.
pub async fn check(
    state: &AppState,
    admin: &AdminRecord,
    secret: &str,
    code: &str,
    source: &str,
    now: DateTime<Utc>,
) -> anyhow::Result<Code> {
    if code.trim().is_empty() {
        return Ok(Code::Wrong);
    }
    let refuse = |tally: &Tally| throttle::totp_wait(tally, now).is_some();
    let begun = state.store.begin_totp_attempt(admin.id, source, now, now - throttle::TOTP_WINDOW, &refuse).await?;
    let (attempt, before) = match begun {
        Ok(begun) => begun,
        Err(tally) => return Ok(Code::Throttled(throttle::totp_wait(&tally, now).unwrap_or_default())),
    };
    let accepted = match TotpSecret::parse(secret).and_then(|s| s.verify(code, now.timestamp())) {
        Some(step) => state.store.use_totp_step(admin.id, step).await?,
        None => false,
    };
    if accepted {
        state.store.forget_totp_attempt(attempt).await?;
        return Ok(Code::Accepted);
    }
    if before.count + 1 >= TOTP.free {
        tracing::warn!(admin = admin.id, "wrong second-factor codes behind a right password; telling the owner");
        if let Err(e) = tell_owner(state, admin, before.count + 1, now).await {
            tracing::error!(admin = admin.id, error = %e, "could not tell the owner of guessed codes");
        }
    }
    Ok(Code::Wrong)
}

/// Queues the warning to the admin's staff number, in every tenant of theirs where it is one:
/// once between two of their logins (keyed by the last one), whoever's code came first.
async fn tell_owner(state: &AppState, admin: &AdminRecord, count: i64, now: DateTime<Utc>) -> anyhow::Result<()> {
    let Some(phone) = admin.phone.as_deref().and_then(|p| crate::domain::PhoneE164::parse(p).ok()) else {
        return Ok(());
    };
    let mut queued = false;
    for member in state.store.admin_tenants(admin.id).await? {
        let Some(tenant) = state.store.tenant(member.tenant_id()).await? else { continue };
        if !state.store.staff(tenant.id).await?.includes(Some(&phone)) {
            continue;
        }
        let text = render(&Console {
            text: ConsoleText::CodesGuessed { email: &admin.email, count, last: when_at(tenant.timezone, now) },
        })?;
        let conversation = state.store.conversation_for_phone(tenant.id, &phone, now).await?;
        let destination = state.replier.destination(&tenant, conversation).await?;
        let since = admin.last_login_at.map_or(0, |at| at.timestamp());
        let key = format!("console:codes:{}:{since}", admin.id);
        if let Some(new) = destination.message(key, OutboundMessage::text(text)?) {
            queued |= state.store.enqueue_outbound(&new, now).await?.is_some() && !new.local;
        }
    }
    if queued {
        state.replier.wake();
    }
    Ok(())
}

/// The console's notice after a login with wrong codes since the one before.
#[derive(askama::Template)]
#[template(path = "console/notice.html")]
pub struct Notice {
    pub email: String,
    pub count: i64,
    pub last: String,
}

impl Notice {
    /// The notice for the admin `email` about `since` (the wrong codes since their last
    /// login), in the time zone of their tenant `first`.
    pub async fn of(
        state: &AppState,
        email: &str,
        first: Option<&TenantRef>,
        since: &Tally,
    ) -> anyhow::Result<Option<Self>> {
        let Some(last) = since.last.filter(|_| since.count > 0) else { return Ok(None) };
        let zone = match first {
            Some(first) => state.store.tenant(first.tenant_id()).await?.map(|t| t.timezone),
            None => None,
        };
        let last = match zone {
            Some(zone) => when_at(zone, last),
            None => last.format("%d/%m %H:%M UTC").to_string(),
        };
        Ok(Some(Self { email: email.to_owned(), count: since.count, last }))
    }
}
