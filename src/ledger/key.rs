//! Idempotency keys and fingerprints.
//!
//! key = `<tool>/v<normalization version>/<sha256 of the canonical identity>` where the
//! identity is the scope (tenant and customer, or tenant and the turn's trigger message) plus
//! the tool's normalized identity fields. The `tool_use_id` is never part of it: a model that
//! repeats a call after a retry uses a new one. The fingerprint hashes all normalized
//! arguments, to tell a true repeat from a changed request under the same key.

use std::collections::BTreeMap;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::normalize::NORMALIZATION_VERSION;
use super::spec::{KeyPolicy, NormalizedArgs};
use crate::domain::{ContactId, LedgerKey, TenantId};

/// Who and when a write is scoped to.
#[derive(Debug, Clone, Copy)]
pub struct KeyScope<'a> {
    pub tenant: TenantId,
    pub customer: ContactId,
    /// The provider id of the turn's newest inbound message (fixed across retries).
    pub trigger_message_id: Option<&'a str>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a per-turn key needs the turn's trigger message")]
pub struct MissingTrigger;

pub fn derive_key(
    tool: &str,
    policy: KeyPolicy,
    scope: &KeyScope<'_>,
    identity: &BTreeMap<String, Value>,
) -> Result<LedgerKey, MissingTrigger> {
    let scope_value = match policy {
        KeyPolicy::Business => json!({ "tenant": scope.tenant.0, "customer": scope.customer.0 }),
        KeyPolicy::PerTurn => {
            json!({ "tenant": scope.tenant.0, "trigger": scope.trigger_message_id.ok_or(MissingTrigger)? })
        }
    };
    // serde_json maps are sorted by key, so this serialization is canonical.
    let canonical = json!({ "scope": scope_value, "identity": identity }).to_string();
    let digest = hex::encode(Sha256::digest(canonical.as_bytes()));
    Ok(LedgerKey::from_stored(format!("{tool}/v{NORMALIZATION_VERSION}/{digest}")))
}

pub fn fingerprint(args: &NormalizedArgs) -> String {
    hex::encode(Sha256::digest(args.to_value().to_string().as_bytes()))
}
