//! A model's tool input: every tool's spec checks and normalizes it; canonical arguments are a
//! fixed point (so formatting never changes an idempotency key), and keys and fingerprints
//! derive from them.
#![no_main]

use balcao::agent::tools::tool_specs;
use balcao::domain::{ContactId, TenantId};
use balcao::ledger::{Effect, FieldKind, KeyScope, derive_key, fingerprint};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

const KINDS: [FieldKind; 7] = [
    FieldKind::Instant,
    FieldKind::Date,
    FieldKind::Money,
    FieldKind::Id,
    FieldKind::Phone,
    FieldKind::Text,
    FieldKind::Label,
];

fn fixed_point(kind: FieldKind, value: &Value) {
    if let Ok(once) = kind.normalize(value) {
        let twice = kind.normalize(&once).unwrap_or_else(|e| panic!("{kind:?}: {once} does not normalize: {e}"));
        assert_eq!(twice, once, "{kind:?} of {value}");
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(input) = serde_json::from_slice::<Value>(data) else { return };
    for kind in KINDS {
        fixed_point(kind, &input);
        if let Value::Object(fields) = &input {
            fields.values().for_each(|v| fixed_point(kind, v));
        }
    }
    let scope = KeyScope { tenant: TenantId(1), customer: ContactId(2), trigger_message_id: Some("wamid.fuzz") };
    for spec in tool_specs() {
        let Ok(args) = spec.normalize(&input) else { continue };
        let again = spec.normalize(&args.to_value()).expect("canonical arguments normalize");
        assert_eq!(again, args, "{}", spec.name);
        if let Effect::Write { policy, .. } = spec.effect {
            let key = derive_key(spec.name, policy, &scope, &spec.identity(&args)).expect("a key");
            assert!(key.as_str().starts_with(spec.name));
        }
        let _ = fingerprint(&args);
    }
});
