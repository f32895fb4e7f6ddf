//! Message ids stored before they were hashed ([`crate::domain::PrivacyKey`]): rewritten once,
//! at start, so deduplication, status updates and click contexts compare like with like, and
//! an erasure finds no raw wamid (which embeds the number) anywhere.
//!
//! Turns not finished keep their trigger id as it was (their ledger keys were derived from it,
//! and a retry must find the same keys), and so do the actions they proposed or decided, which
//! the retry compares with it; the next start hashes them once those turns are done. Stop
//! servers of the older version before starting this one: an id they store raw after the
//! rewrite would meet its own hash.

use crate::domain::{MESSAGE_ID_PREFIX, PrivacyKey};
use crate::store::{Dialect, Store, StoreResult, writing};

/// Integer-keyed columns that hold a provider message id, with the rows to leave alone.
const COLUMNS: &[(&str, &str, &str)] = &[
    ("inbound_messages", "provider_message_id", "TRUE"),
    ("inbound_messages", "context_id", "TRUE"),
    ("outbound_messages", "provider_message_id", "TRUE"),
    ("jobs", "trigger_message_id", "state IN ('completed', 'dead')"),
];
const ACTION_COLUMNS: &[&str] = &["proposed_by", "confirmed_message"];
/// Rows rewritten per transaction.
const BATCH: i64 = 500;

/// Rewrites `$column` of `$table` (ids of type `$id`) in batches until no raw id is left.
macro_rules! rehash_column {
    ($store:expr, $key:expr, $table:expr, $column:expr, $keep:expr, $id:ty) => {
        async {
            let raw = format!("{MESSAGE_ID_PREFIX}%");
            let (table, column, keep) = ($table, $column, $keep);
            let mut rewritten = 0u64;
            loop {
                let done = writing!($store, pool => {
                    let mut tx = pool.begin_write().await?;
                    let rows: Vec<($id, String)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
                        "SELECT id, {column} FROM {table}
                         WHERE {column} IS NOT NULL AND {column} NOT LIKE $1 AND {keep} LIMIT $2"
                    )))
                    .bind(&raw)
                    .bind(BATCH)
                    .fetch_all(&mut *tx)
                    .await?;
                    for (id, value) in &rows {
                        sqlx::query(sqlx::AssertSqlSafe(format!("UPDATE {table} SET {column} = $1 WHERE id = $2")))
                            .bind($key.message_id(value))
                            .bind(id)
                            .execute(&mut *tx)
                            .await?;
                    }
                    tx.commit().await?;
                    rewritten += rows.len() as u64;
                    rows.len() < BATCH as usize
                });
                if done {
                    return Ok::<_, crate::store::StoreError>(rewritten);
                }
            }
        }
        .await
    };
}

impl Store {
    /// Hashes every message id still stored raw; how many it rewrote. Idempotent.
    pub async fn hash_stored_message_ids(&self, key: &PrivacyKey) -> StoreResult<u64> {
        let mut rewritten = 0u64;
        for &(table, column, keep) in COLUMNS {
            rewritten += rehash_column!(self, key, table, column, keep, i64)?;
        }
        for &column in ACTION_COLUMNS {
            let keep = format!(
                "NOT EXISTS (SELECT 1 FROM jobs j WHERE j.tenant_id = pending_actions.tenant_id
                   AND j.trigger_message_id = pending_actions.{column} AND j.state NOT IN ('completed', 'dead'))"
            );
            rewritten += rehash_column!(self, key, "pending_actions", column, keep.as_str(), String)?;
        }
        Ok(rewritten)
    }
}
