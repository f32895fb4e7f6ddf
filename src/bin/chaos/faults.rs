//! The faults a campaign injects, counted by kind for the report.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Fault {
    /// The same webhook delivered again at once, to another process, concurrently.
    DuplicateDelivery,
    /// A webhook delivered again at the end of the run, after later ones (out of order).
    LateRedelivery,
    /// Identical or equivalent `tool_use` blocks in one model response.
    DuplicateToolUse,
    /// The customer asks again in a later turn and the model repeats the call.
    ModelForgets,
    /// A 429, 529 or 500 from the model.
    ModelError,
    /// Two or three clicks on one button, at once.
    DoubleClick,
    /// A click on a button whose action was already decided.
    StaleClick,
    /// A typed confirmation racing the button.
    TypedConfirmRace,
    /// A click on a button whose proposal has expired (its row aged past its expiry, as
    /// half an hour passing would).
    ExpiredClick,
    /// SIGKILL of a server process, restarted on the same port.
    Kill,
    /// SIGKILL of a server as the Pix provider receives a charge's creation (between the
    /// provider call and its record, when the victim made the call).
    KillAtProviderCall,
    /// SIGKILL of a server just after a button click was acknowledged (between the confirm
    /// and its execution, when the victim took the click).
    KillAfterClick,
    /// SIGSTOP of a server process past its leases, then SIGCONT.
    Stop,
    /// SIGTERM of every process in turn, each started again (a rolling restart).
    RollingRestart,
    /// 429 or 5xx from the Graph API.
    GraphError,
    /// The Graph API accepted a message and the response never came.
    GraphLostResponse,
    /// A status webhook delivered twice.
    DuplicateStatus,
    /// The Pix provider answered 5xx without acting.
    ProviderError,
    /// The Pix provider created the charge and the response never came.
    ProviderTimeoutAfterCommit,
    /// A payment notification delivered several times at once.
    DuplicateNotification,
    /// A customer erased (LGPD) while their messages are in flight, then writing again.
    ErasureMidConversation,
    /// A payment notification sent up to two seconds late.
    DelayedNotification,
    /// The customer tried to pay a charge already withdrawn (its hold ended): the provider took
    /// nothing.
    PaidTooLate,
    /// A payment notification sent while the charge's own creation was still unanswered.
    EarlyNotification,
    /// A refund the Pix provider made whose answer never came.
    RefundLostAnswer,
    /// A refund request the Pix provider answered 5xx without acting on.
    RefundError,
    /// A refund left processing at the provider, settled by its notification or the poll.
    RefundSettledLater,
    /// `pg_terminate_backend` on the servers' connections.
    ConnectionsKilled,
    /// A booking held for its deposit cancelled once its Pix was sent: the charge must be
    /// withdrawn at the provider, once, unless it was paid.
    CancelHeld,
}

/// Counts shared by the run and the fakes.
#[derive(Debug, Clone, Default)]
pub struct Faults(Arc<Mutex<BTreeMap<Fault, u64>>>);

impl Faults {
    pub fn add(&self, fault: Fault) {
        *self.lock().entry(fault).or_default() += 1;
    }

    pub fn snapshot(&self) -> BTreeMap<Fault, u64> {
        self.lock().clone()
    }

    /// Faults injected so far that hit the processes or their connections, whichever run drew
    /// them: every run in flight lives through them.
    pub fn process_faults(&self) -> u64 {
        use Fault::*;
        let global = [Kill, KillAtProviderCall, KillAfterClick, Stop, RollingRestart, ConnectionsKilled];
        self.lock().iter().filter(|(f, _)| global.contains(f)).map(|(_, n)| n).sum()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<Fault, u64>> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// What the runs got done (bookings made, charges paid…), so a campaign where the paths stopped
/// being exercised cannot pass on empty tables.
#[derive(Debug, Clone, Default)]
pub struct Coverage(Arc<Mutex<BTreeMap<&'static str, u64>>>);

impl Coverage {
    pub fn add(&self, what: &'static str, n: u64) {
        *self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).entry(what).or_default() += n;
    }

    pub fn snapshot(&self) -> BTreeMap<&'static str, u64> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }
}
