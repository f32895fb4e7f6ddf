//! The merchant's side of an erasure: rows in the staff's conversations that quote the
//! customer rather than belong to them (a staff member typing the number or the CPF for a
//! charge, the offer, "enviada" and "paga" notices, the merchant agent's history and ledger
//! rows, an error naming the recipient), found by what they say ([`crate::domain::Needles`]).
//! Only staff conversations are searched: another customer's messages are theirs, and a name
//! or a description they share with the erased person must not cost them anything. Amounts,
//! dates, ids and the rows themselves stay.

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

/// A column of free text or JSON in a staff conversation's rows.
pub(super) struct Column {
    pub table: &'static str,
    pub column: &'static str,
    /// The column naming the row's conversation.
    pub conversation: &'static str,
    pub redact: Redact,
    /// What staff typed: searched for the customer's charge descriptions too.
    pub typed: bool,
}

const fn column(table: &'static str, column: &'static str, redact: Redact) -> Column {
    Column { table, column, conversation: "conversation_id", redact, typed: false }
}

/// Every column written from what staff typed or were told, in tables keyed by an integer
/// `id`. `tests/api/erasure.rs` scans the whole schema after an erasure, so a column missing
/// here fails there.
pub(super) const COLUMNS: &[Column] = &[
    Column { typed: true, ..column("inbound_messages", "body", Redact::Text) },
    Column { typed: true, ..column("inbound_messages", "raw", Redact::Json) },
    Column { typed: true, ..column("inbound_messages", "transcript", Redact::Text) },
    column("outbound_messages", "message", Redact::Json),
    column("outbound_messages", "last_error", Redact::Text),
    column("conversation_messages", "content", Redact::Json),
    Column { conversation: "id", typed: true, ..column("conversations", "menu_state", Redact::Clear) },
    column("agent_tool_executions", "arguments", Redact::Json),
    column("agent_tool_executions", "result", Redact::Json),
    column("agent_tool_executions", "error", Redact::Text),
    column("jobs", "last_error", Redact::Text),
    Column { conversation: "merchant_conversation_id", ..column("refunds", "reason", Redact::Text) },
];

/// The same for pending actions (keyed by a text id). Their payloads are typed and redacted
/// by kind in the erasure itself.
pub(super) const ACTION_COLUMNS: &[(&str, Redact)] =
    &[("offer_text", Redact::Text), ("result", Redact::Json), ("error", Redact::Text)];

/// Redacts every row of the staff conversations `$staff` that names the person (`$needles`;
/// `$typed` adds what staff typed about them), in the erasure's transaction.
macro_rules! scrub_in_tx {
    ($tx:ident, $tenant:expr, $staff:expr, $needles:expr, $typed:expr, $placeholder:expr) => {
        async {
            let needles: &$crate::domain::Needles = $needles;
            let typed: &$crate::domain::Needles = $typed;
            let (patterns, typed_patterns) = (needles.like_patterns(), typed.like_patterns());
            for &conversation in $staff {
                for c in scrub::COLUMNS {
                    let (needles, patterns) = if c.typed { (typed, &typed_patterns) } else { (needles, &patterns) };
                    let at = (c.table, c.column, c.conversation);
                    scrub::scrub_column!(
                        $tx,
                        $tenant,
                        conversation,
                        needles,
                        $placeholder,
                        patterns,
                        at,
                        c.redact,
                        i64
                    );
                }
                for &(column, redact) in scrub::ACTION_COLUMNS {
                    let at = ("pending_actions", column, "conversation_id");
                    scrub::scrub_column!(
                        $tx,
                        $tenant,
                        conversation,
                        needles,
                        $placeholder,
                        &patterns,
                        at,
                        redact,
                        String
                    );
                }
            }
            Ok::<_, $crate::store::StoreError>(())
        }
        .await
    };
}
pub(crate) use scrub_in_tx;

/// Redacts `column` of `table` (ids of type `$id`) in one conversation where it names the
/// person: one read finds the rows any pattern matches, each then judged and rewritten once.
macro_rules! scrub_column {
    ($tx:ident, $tenant:expr, $conversation:expr, $needles:expr, $placeholder:expr, $patterns:expr, $at:expr, $redact:expr, $id:ty) => {{
        let (table, column, scope) = $at;
        let patterns: &[String] = $patterns;
        // No needle of this kind (a contact with no number, name or document): nothing to find.
        if !patterns.is_empty() {
            let any = (0..patterns.len())
                .map(|i| format!("LOWER(CAST({column} AS TEXT)) LIKE ${}", i + 3))
                .collect::<Vec<_>>()
                .join(" OR ");
            let sql = format!(
                "SELECT id, CAST({column} AS TEXT) FROM {table} WHERE tenant_id = $1 AND {scope} = $2 AND ({any})"
            );
            let mut query =
                sqlx::query_as::<_, ($id, String)>(sqlx::AssertSqlSafe(sql)).bind($tenant.0).bind($conversation);
            for pattern in patterns {
                query = query.bind(pattern);
            }
            for (id, value) in query.fetch_all(&mut *$tx).await? {
                let update = format!("UPDATE {table} SET {column} = $1 WHERE tenant_id = $2 AND id = $3");
                scrub::redact_value!($tx, update, $redact, $needles, $placeholder, value, $tenant.0, id);
            }
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
