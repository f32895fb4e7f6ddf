//! The ledger's fence inside a write transaction: a new execution row, the row a fence holds,
//! its settlement, and the supersession of rows about a changed subject.

/// The insert of `$new` as a new row when its key has none, `RETURNING id` (no row when the
/// key is taken). `$1`…`$12` are bound from the [`NewExecution`] (`$10` a fresh token for
/// `reserved_by`, `$11` the time `$now`, `$12` the turn's attempt); `$columns` and `$values`
/// add what a path sets beyond them (the caller binds `$13` on).
macro_rules! insert_new_execution {
    ($columns:literal, $values:literal, $new:expr, $now:expr) => {
        sqlx::query_scalar::<_, i64>(concat!(
            "INSERT INTO agent_tool_executions
                 (tenant_id, idempotency_key, tool, fingerprint, arguments, conversation_id, contact_id, turn_id,
                  tool_use_id, reserved_by, status, generation, locked_until, replay_count, created_at, updated_at,
                  turn_attempt",
            $columns,
            ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, ",
            $values,
            ") ON CONFLICT (tenant_id, idempotency_key) DO NOTHING RETURNING id"
        ))
        .bind($new.tenant.0)
        .bind($new.key.as_str())
        .bind($new.tool)
        .bind($new.fingerprint)
        .bind(sqlx::types::Json($new.arguments))
        .bind($new.conversation.0)
        .bind($new.contact.0)
        .bind($new.turn.map(|t| t.0))
        .bind($new.tool_use_id)
        .bind(uuid::Uuid::new_v4().to_string())
        .bind($now)
        .bind($new.turn_attempt)
    };
}
pub(crate) use insert_new_execution;

/// Inside a write transaction, before the effect: the row `fence` holds (see
/// `crate::ledger::fence`), or `None` when it no longer holds it. A held row is re-checked at
/// its generation, which on PostgreSQL locks it until the transaction ends, so no takeover
/// slips in before the commit. A claim inserts the row, running, in this transaction; a
/// concurrent claim of the same key waits on the unique index and then finds it taken.
macro_rules! hold_fence {
    ($tx:expr, $tenant:expr, $fence:expr) => {
        match $fence {
            $crate::ledger::Fence::Held { held, .. } => sqlx::query(
                "UPDATE agent_tool_executions SET generation = generation
                 WHERE tenant_id = $1 AND id = $2 AND generation = $3 AND status = 'running'",
            )
            .bind($tenant.0)
            .bind(held.execution)
            .bind(held.generation)
            .execute(&mut *$tx)
            .await
            .map(|r| $crate::store::changed_one(r).then_some(held)),
            $crate::ledger::Fence::Claim(claim) => $crate::store::tx::insert_new_execution!(
                "",
                "'running', 1, NULL, 0, $11, $11, $12",
                claim.new,
                claim.now
            )
            .fetch_optional(&mut *$tx)
            .await
            .map(|id| match id {
                Some(execution) => Some($crate::ledger::Held { execution, generation: 1 }),
                None => {
                    claim.mark_lost();
                    None
                }
            }),
        }
    };
}
pub(crate) use hold_fence;

/// Inside a write transaction: settles the row `held` as succeeded with `result`, recording
/// what its effect is about; false when the fence no longer holds. Once the transaction has
/// committed, the caller marks its fence settled ([`crate::ledger::Fence::mark_settled`]).
macro_rules! settle_in_tx {
    ($tx:expr, $tenant:expr, $held:expr, $subject:expr, $result:expr, $now:expr) => {
        sqlx::query(
            "UPDATE agent_tool_executions SET status = 'succeeded', result = $1, error = NULL, subject = $2,
                 locked_until = NULL, updated_at = $3, completed_at = $3
             WHERE tenant_id = $4 AND id = $5 AND generation = $6 AND status = 'running'",
        )
        .bind(sqlx::types::Json($result))
        .bind($subject)
        .bind($now)
        .bind($tenant.0)
        .bind($held.execution)
        .bind($held.generation)
        .execute(&mut *$tx)
        .await
        .map($crate::store::changed_one)
    };
}
pub(crate) use settle_in_tx;

/// Inside a write transaction: supersedes every succeeded row about `subject` (or, for rows
/// written before subjects existed, under `key`), except the row `except` holds: the thing
/// they describe changed, so a repeat of any of them runs again instead of replaying.
macro_rules! supersede_subject {
    ($tx:expr, $tenant:expr, $subject:expr, $key:expr, $except:expr, $now:expr) => {
        sqlx::query(
            "UPDATE agent_tool_executions SET status = 'superseded', updated_at = $1
             WHERE tenant_id = $2 AND status = 'succeeded' AND id <> $5
               AND (subject = $3 OR idempotency_key = $4)",
        )
        .bind($now)
        .bind($tenant.0)
        .bind($subject)
        .bind($key)
        .bind($except.map_or(0_i64, |h: crate::ledger::Held| h.execution))
        .execute(&mut *$tx)
        .await
    };
}
pub(crate) use supersede_subject;
