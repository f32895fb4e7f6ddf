//! The ids a button carries: a pending action's random id and the decision, `a:<uuid>:y|n`.
//! Everything else in a click (its title, its context) is ignored: the id is looked up, never
//! trusted.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// The guided menu's entry points, which other screens (a booking's confirmation) offer too:
/// "Agendar" (the services) and "Meus horários" (the customer's bookings).
pub const MENU_BOOK: &str = "g:book";
pub const MENU_MINE: &str = "g:mine";

/// A pending action's id: random, so it cannot be guessed from anything the customer sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ActionId(pub Uuid);

impl ActionId {
    pub fn random() -> Self {
        Self(Uuid::new_v4())
    }

    pub fn parse(raw: &str) -> Option<Self> {
        Uuid::try_parse(raw).ok().map(Self)
    }

    /// What a ledger row about this action records as its subject.
    pub fn subject(&self) -> String {
        format!("action:{}", self.0)
    }
}

impl std::fmt::Display for ActionId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The decision a button carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Confirm,
    Decline,
}

/// A button id naming an action: `a:<uuid>:y` or `a:<uuid>:n`. Everything else in the click
/// (its title, its context) is ignored: the id is looked up, never trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClickId {
    pub action: ActionId,
    pub decision: Decision,
}

impl ClickId {
    pub fn new(action: ActionId, decision: Decision) -> Self {
        Self { action, decision }
    }

    pub fn id(&self) -> String {
        let d = match self.decision {
            Decision::Confirm => "y",
            Decision::Decline => "n",
        };
        format!("a:{}:{d}", self.action.0.simple())
    }

    /// The click a reply id stands for; `None` for anything not in this exact grammar.
    pub fn parse(raw: &str) -> Option<Self> {
        // 2 + 32 + 2: anything longer was not ours, and is not even split.
        if raw.len() != 36 || !raw.is_ascii() {
            return None;
        }
        let rest = raw.strip_prefix("a:")?;
        let (uuid, decision) = rest.split_once(':')?;
        let decision = match decision {
            "y" => Decision::Confirm,
            "n" => Decision::Decline,
            _ => return None,
        };
        if uuid.len() != 32 || !uuid.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()) {
            return None;
        }
        Some(Self { action: ActionId(Uuid::try_parse(uuid).ok()?), decision })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn click_ids_round_trip_and_reject_anything_else() {
        let id = ActionId::random();
        for decision in [Decision::Confirm, Decision::Decline] {
            let click = ClickId::new(id, decision);
            assert_eq!(ClickId::parse(&click.id()), Some(click));
        }
        let good = ClickId::new(id, Decision::Confirm).id();
        for bad in [
            String::new(),
            "a:".into(),
            good.replace(":y", ":x"),
            good.to_uppercase(),
            format!("{good}:extra"),
            good.replace("a:", "b:"),
            format!("a:{}:y", id.0.hyphenated()),
            "a:zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz:y".into(),
            "g:menu".into(),
            "a:".repeat(100),
        ] {
            assert_eq!(ClickId::parse(&bad), None, "{bad:?}");
        }
    }
}
