//! The console login's throttle: growing delays by source address, by e-mail from one source,
//! and by e-mail across sources, never a fixed lockout.
//!
//! Invariants:
//! - a refused attempt is not counted (it cannot keep anyone locked out), and a wait is
//!   always bounded (each delay has a cap);
//! - a source with fewer failures in the window than the free ones (a typo or two) is never
//!   held back by failures elsewhere, so the owner typing the right password from their own
//!   connection gets in however many guesses others make; those others are slowed by their own
//!   source's failures, and a source that keeps failing is also held to the e-mail's;
//! - one source spraying many e-mails is slowed by its own count.
//!
//! Many sources guessing one e-mail each get a few free tries per address: that is what the
//! optional second factor (`balcao admin totp EMAIL`) is for, and so its codes are throttled
//! per admin, whatever the source ([`totp_wait`]): only someone who has the password reaches
//! that throttle, so it cannot be used to lock the owner out by strangers, and the owner is
//! told when it starts to bite.

use chrono::{DateTime, TimeDelta, Utc};

use crate::store::{LoginFailures, Tally};

/// Failures older than this are not counted.
pub const WINDOW: TimeDelta = TimeDelta::hours(1);

/// Free failures, then a delay that doubles from `base` up to `cap`.
pub struct Limit {
    pub free: i64,
    base: TimeDelta,
    cap: TimeDelta,
}

/// One e-mail from one source: a mistyped password or two cost nothing.
const PAIR: Limit = Limit { free: 3, base: TimeDelta::seconds(1), cap: TimeDelta::minutes(15) };
/// One source, any e-mail: an office behind one address shares it.
const SOURCE: Limit = Limit { free: 10, base: TimeDelta::seconds(1), cap: TimeDelta::minutes(15) };
/// One e-mail, any source that has failed.
const EMAIL: Limit = Limit { free: 10, base: TimeDelta::seconds(1), cap: TimeDelta::minutes(5) };

/// Wrong codes behind a right password are counted over this long, per admin.
pub const TOTP_WINDOW: TimeDelta = TimeDelta::hours(24);
/// One admin's second factor, from any source: five wrong codes a day are free (a typo, a
/// phone's clock off), then each waits twice as long as the last, from a minute up to an hour.
/// A guesser with the password gets about thirty codes a day (three steps each: ±30 s), about
/// one chance in ten thousand, and the owner is told at the fifth.
pub const TOTP: Limit = Limit { free: 5, base: TimeDelta::minutes(1), cap: TimeDelta::hours(1) };

/// How long an attempt must wait, `None` when it may go ahead.
pub fn wait(failures: &LoginFailures, now: DateTime<Utc>) -> Option<TimeDelta> {
    let mut wait = until(&failures.pair, &PAIR, now).max(until(&failures.source, &SOURCE, now));
    // A typo or two (the owner's own) do not put a source under the e-mail's delay.
    if failures.source.count >= PAIR.free {
        wait = wait.max(until(&failures.email, &EMAIL, now));
    }
    (wait > TimeDelta::zero()).then_some(wait)
}

/// How long a code for the second factor must wait, given the admin's wrong codes in the
/// window; `None` when it may be checked.
pub fn totp_wait(failures: &Tally, now: DateTime<Utc>) -> Option<TimeDelta> {
    let wait = until(failures, &TOTP, now);
    (wait > TimeDelta::zero()).then_some(wait)
}

fn until(tally: &Tally, limit: &Limit, now: DateTime<Utc>) -> TimeDelta {
    let Some(last) = tally.last else { return TimeDelta::zero() };
    if tally.count < limit.free {
        return TimeDelta::zero();
    }
    let doublings = u32::try_from(tally.count - limit.free).unwrap_or(u32::MAX).min(20);
    let delay = (limit.base * (1i32 << doublings)).min(limit.cap);
    (last + delay - now).max(TimeDelta::zero())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tally(count: i64, ago: i64, now: DateTime<Utc>) -> Tally {
        Tally { count, last: Some(now - TimeDelta::seconds(ago)) }
    }

    #[test]
    fn delays_grow_are_capped_and_spare_a_clean_source() {
        let now = Utc::now();
        let none = LoginFailures::default();
        assert_eq!(wait(&none, now), None);
        let typos = LoginFailures { pair: tally(2, 0, now), source: tally(2, 0, now), email: tally(2, 0, now) };
        assert_eq!(wait(&typos, now), None);
        let guessing = LoginFailures { pair: tally(8, 0, now), source: tally(8, 0, now), email: tally(8, 0, now) };
        assert_eq!(wait(&guessing, now), Some(TimeDelta::seconds(32)));
        let forever = LoginFailures { pair: tally(500, 0, now), source: tally(500, 0, now), email: tally(500, 0, now) };
        assert_eq!(wait(&forever, now), Some(TimeDelta::minutes(15)));
        // The owner, from a source with no failures, whatever the e-mail has seen.
        let owner = LoginFailures { email: tally(10_000, 0, now), ..Default::default() };
        assert_eq!(wait(&owner, now), None);
        // A source that keeps failing elsewhere is held to the e-mail's delay too; a typo is not.
        let other = LoginFailures { source: tally(3, 600, now), email: tally(12, 0, now), ..Default::default() };
        assert_eq!(wait(&other, now), Some(TimeDelta::seconds(4)));
        let typo = LoginFailures { source: tally(2, 0, now), pair: tally(2, 0, now), email: tally(500, 0, now) };
        assert_eq!(wait(&typo, now), None);
        // Spraying e-mails from one source.
        let spray = LoginFailures { source: tally(14, 3, now), ..Default::default() };
        assert_eq!(wait(&spray, now), Some(TimeDelta::seconds(13)));
    }

    #[test]
    fn wrong_codes_behind_a_right_password_wait_per_admin() {
        let now = Utc::now();
        assert_eq!(totp_wait(&tally(4, 0, now), now), None);
        assert_eq!(totp_wait(&tally(5, 0, now), now), Some(TimeDelta::minutes(1)));
        assert_eq!(totp_wait(&tally(7, 60, now), now), Some(TimeDelta::minutes(3)));
        assert_eq!(totp_wait(&tally(400, 0, now), now), Some(TimeDelta::hours(1)));
        assert_eq!(totp_wait(&tally(6, 120, now), now), None);
    }
}
