//! What a tool declares: its name, description, fields (each typed, some part of its
//! identity), whether it reads or writes, and for a write its key policy.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::normalize::{FieldKind, NormalizeError};

/// Which business identity an idempotency key covers, besides the tool's identity fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyPolicy {
    /// Tenant + customer: for actions that never legitimately repeat, like booking this
    /// customer with this professional at this time.
    Business,
    /// The turn's trigger message: for actions that may legitimately repeat in later turns.
    PerTurn,
}

/// Where a write's effect lands, which decides how many commits a call costs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// Rows in Balcão's own database, every one written in the transaction that stores the
    /// outcome (through the attempt's fence): the row is claimed in that same transaction,
    /// one commit per call (see `ledger::fence`). A handler may also succeed without writing
    /// (nothing to change); its outcome is then stored on its own, also one commit. Such a
    /// handler must have no effect anywhere else: racing duplicates may each run it up to
    /// their claim, and only the claim's winner writes.
    Local,
    /// Anything outside (a Pix provider, a message sent): the reservation commits first and
    /// its lease fences the attempt, then the outcome is stored.
    Outside,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    Read,
    Write {
        policy: KeyPolicy,
        /// Told to the model with a `conflict`: what it may do instead.
        on_conflict: &'static str,
        reach: Reach,
    },
}

#[derive(Debug, Clone, Copy)]
pub struct FieldSpec {
    pub name: &'static str,
    pub kind: FieldKind,
    pub required: bool,
    /// Part of the idempotency key (the rest only goes into the fingerprint).
    pub identity: bool,
    pub description: &'static str,
}

#[derive(Debug, Clone, Copy)]
pub struct ToolSpec {
    pub name: &'static str,
    pub description: &'static str,
    pub effect: Effect,
    pub fields: &'static [FieldSpec],
}

/// Tool arguments after normalization: canonical values in a sorted map, so field order and
/// formatting never matter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NormalizedArgs(pub BTreeMap<String, Value>);

/// Why an input was refused. Goes back to the model as an error; nothing runs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InputError {
    #[error("the input must be a JSON object")]
    NotAnObject,
    #[error("unknown field {0:?}")]
    UnknownField(String),
    #[error("missing required field {0:?}")]
    Missing(&'static str),
    #[error("field {field:?}: {reason}")]
    Invalid { field: &'static str, reason: NormalizeError },
}

impl ToolSpec {
    /// The JSON Schema shown to the model.
    pub fn input_schema(&self) -> Value {
        let mut properties = Map::new();
        for f in self.fields {
            let mut schema = f.kind.schema();
            schema["description"] = json!(f.description);
            properties.insert(f.name.to_owned(), schema);
        }
        let required: Vec<&str> = self.fields.iter().filter(|f| f.required).map(|f| f.name).collect();
        json!({ "type": "object", "properties": properties, "required": required, "additionalProperties": false })
    }

    pub fn is_write(&self) -> bool {
        matches!(self.effect, Effect::Write { .. })
    }

    /// Checks and normalizes `input`; an unknown, missing or malformed field is an error,
    /// never coerced into something else.
    pub fn normalize(&self, input: &Value) -> Result<NormalizedArgs, InputError> {
        let object = match input {
            Value::Object(o) => o,
            // Models send `null` or nothing for tools without fields.
            Value::Null if self.fields.iter().all(|f| !f.required) => &Map::new(),
            _ => return Err(InputError::NotAnObject),
        };
        if let Some(unknown) = object.keys().find(|k| !self.fields.iter().any(|f| f.name == k.as_str())) {
            return Err(InputError::UnknownField(unknown.clone()));
        }
        let mut args = BTreeMap::new();
        for f in self.fields {
            match object.get(f.name) {
                None | Some(Value::Null) if f.required => return Err(InputError::Missing(f.name)),
                None | Some(Value::Null) => {}
                Some(v) => {
                    let canonical =
                        f.kind.normalize(v).map_err(|reason| InputError::Invalid { field: f.name, reason })?;
                    args.insert(f.name.to_owned(), canonical);
                }
            }
        }
        Ok(NormalizedArgs(args))
    }

    /// The identity subset of normalized arguments.
    pub fn identity(&self, args: &NormalizedArgs) -> BTreeMap<String, Value> {
        args.0
            .iter()
            .filter(|(name, _)| self.fields.iter().any(|f| f.identity && f.name == name.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }
}

impl NormalizedArgs {
    pub fn to_value(&self) -> Value {
        Value::Object(self.0.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
    }

    pub fn i64(&self, name: &str) -> Option<i64> {
        self.0.get(name).and_then(Value::as_i64)
    }

    pub fn str(&self, name: &str) -> Option<&str> {
        self.0.get(name).and_then(Value::as_str)
    }
}
