//! Typed row ids, so a conversation id can never be passed where a tenant id is expected.

use serde::{Deserialize, Serialize};

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub i64);

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                self.0.fmt(f)
            }
        }
    };
}

id_type!(
    /// A business using the server.
    TenantId
);
id_type!(
    /// A WhatsApp user of one tenant.
    ContactId
);
id_type!(
    /// The single conversation between a tenant and a contact.
    ConversationId
);
id_type!(
    /// A turn job; its id is the turn's identity.
    JobId
);
id_type!(
    /// An outbox row.
    OutboundId
);
