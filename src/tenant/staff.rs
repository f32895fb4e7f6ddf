//! A tenant's staff: the numbers whose messages reach the merchant's agent and whose taps may
//! confirm a merchant's action. Decided from the stored sender, never from a message's text.

use crate::domain::PhoneE164;

/// The staff numbers of one tenant, as the store holds them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Staff(Vec<PhoneE164>);

impl Staff {
    pub fn new(phones: Vec<PhoneE164>) -> Self {
        Self(phones)
    }

    /// Whether a sender is one of the staff, with or without a Brazilian mobile's ninth digit
    /// on either side; a sender known only by a user id never is.
    pub fn includes(&self, wa_id: Option<&PhoneE164>) -> bool {
        wa_id.is_some_and(|wa_id| self.0.iter().any(|staff| staff.same_person(wa_id)))
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn iter(&self) -> std::slice::Iter<'_, PhoneE164> {
        self.0.iter()
    }
}

impl IntoIterator for Staff {
    type Item = PhoneE164;
    type IntoIter = std::vec::IntoIter<PhoneE164>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}
