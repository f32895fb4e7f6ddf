//! The merchant's side of an erasure: rows that are not the customer's own but quote them (a
//! staff member typing the number for a charge, the "enviada" and "paga" notices, the merchant
//! agent's history, an error naming the recipient), found by what they say
//! ([`crate::domain::Needles`]) anywhere in the tenant, since their conversation is someone
//! else's. Amounts, dates, ids and the rows themselves stay.

/// How a column's value is redacted.
#[derive(Clone, Copy)]
pub(super) enum Redact {
    /// A text: replaced whole.
    Text,
    /// JSON: the matching strings and their free-text siblings.
    Json,
    /// A form's state: cleared (a half-typed charge to the person starts over).
    Clear,
}

/// Every column of free text or JSON written from what people typed or were told, in tables
/// keyed by an integer `id`. `tests/api/privacy.rs` scans the whole schema after an erasure, so
/// a column missing here fails there.
pub(super) const COLUMNS: &[(&str, &str, Redact)] = &[
    ("inbound_messages", "body", Redact::Text),
    ("inbound_messages", "raw", Redact::Json),
    ("outbound_messages", "message", Redact::Json),
    ("outbound_messages", "last_error", Redact::Text),
    ("conversation_messages", "content", Redact::Json),
    ("conversations", "menu_state", Redact::Clear),
    ("agent_tool_executions", "arguments", Redact::Json),
    ("agent_tool_executions", "result", Redact::Json),
    ("agent_tool_executions", "error", Redact::Text),
    ("jobs", "last_error", Redact::Text),
    ("charges", "description", Redact::Text),
    ("refunds", "reason", Redact::Text),
    ("payment_events", "last_error", Redact::Text),
];

/// The same for pending actions (keyed by a text id). Their payloads are typed and redacted
/// by kind in the erasure itself.
pub(super) const ACTION_COLUMNS: &[(&str, Redact)] =
    &[("offer_text", Redact::Text), ("result", Redact::Json), ("error", Redact::Text)];

/// Redacts every row of the tenant that names the person, in the erasure's transaction.
macro_rules! scrub_in_tx {
    ($tx:ident, $tenant:expr, $needles:expr, $placeholder:expr) => {
        async {
            let needles: &$crate::domain::Needles = $needles;
            let patterns = needles.like_patterns();
            for &(table, column, redact) in scrub::COLUMNS {
                scrub::scrub_column!($tx, $tenant, needles, $placeholder, &patterns, table, column, redact, i64);
            }
            for &(column, redact) in scrub::ACTION_COLUMNS {
                scrub::scrub_column!(
                    $tx,
                    $tenant,
                    needles,
                    $placeholder,
                    &patterns,
                    "pending_actions",
                    column,
                    redact,
                    String
                );
            }
            Ok::<_, $crate::store::StoreError>(())
        }
        .await
    };
}
pub(crate) use scrub_in_tx;

/// Redacts `$column` of `$table` (ids of type `$id`) where it names the person: the rows any
/// pattern finds, each judged and rewritten once.
macro_rules! scrub_column {
    ($tx:ident, $tenant:expr, $needles:expr, $placeholder:expr, $patterns:expr, $table:expr, $column:expr, $redact:expr, $id:ty) => {{
        let (table, column) = ($table, $column);
        let mut rows = std::collections::BTreeMap::<$id, String>::new();
        for pattern in $patterns {
            let found: Vec<($id, String)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
                "SELECT id, CAST({column} AS TEXT) FROM {table}
                 WHERE tenant_id = $1 AND LOWER(CAST({column} AS TEXT)) LIKE $2"
            )))
            .bind($tenant.0)
            .bind(pattern)
            .fetch_all(&mut *$tx)
            .await?;
            rows.extend(found);
        }
        for (id, value) in rows {
            let update = format!("UPDATE {table} SET {column} = $1 WHERE tenant_id = $2 AND id = $3");
            scrub::redact_value!($tx, update, $redact, $needles, $placeholder, value, $tenant.0, id);
        }
    }};
}
pub(crate) use scrub_column;

/// Writes one redacted value back, if it names the person.
macro_rules! redact_value {
    ($tx:ident, $update:expr, $redact:expr, $needles:expr, $placeholder:expr, $value:expr, $tenant:expr, $id:expr) => {
        match $redact {
            scrub::Redact::Text => {
                if let Some(text) = $needles.scrub_text(&$value, $placeholder) {
                    sqlx::query(sqlx::AssertSqlSafe($update))
                        .bind(text)
                        .bind($tenant)
                        .bind(&$id)
                        .execute(&mut *$tx)
                        .await?;
                }
            }
            scrub::Redact::Json => {
                let mut json: serde_json::Value = serde_json::from_str(&$value)
                    .map_err(|e| $crate::store::StoreError::Corrupt(format!("JSON column: {e}")))?;
                if $needles.scrub_json(&mut json, $placeholder) {
                    sqlx::query(sqlx::AssertSqlSafe($update))
                        .bind(sqlx::types::Json(&json))
                        .bind($tenant)
                        .bind(&$id)
                        .execute(&mut *$tx)
                        .await?;
                }
            }
            scrub::Redact::Clear => {
                if $needles.matches(&$value) {
                    sqlx::query(sqlx::AssertSqlSafe($update))
                        .bind(None::<sqlx::types::Json<serde_json::Value>>)
                        .bind($tenant)
                        .bind(&$id)
                        .execute(&mut *$tx)
                        .await?;
                }
            }
        }
    };
}
pub(crate) use redact_value;
