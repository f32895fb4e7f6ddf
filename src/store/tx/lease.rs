//! Holding a job's lease inside a write transaction: the fence every turn write is made under.

/// Inside a write transaction: true while `lease` is held, by the conditional `complete` uses.
/// On PostgreSQL the update locks the job row until the transaction ends, so the reaper cannot
/// take the lease between this check and the commit.
macro_rules! hold_job_lease {
    ($tx:expr, $lease:expr, $now:expr) => {
        sqlx::query(
            "UPDATE jobs SET locked_until = locked_until
             WHERE id = $1 AND state = 'running' AND locked_by = $2 AND attempts = $3 AND locked_until > $4",
        )
        .bind($lease.job.0)
        .bind(&$lease.worker)
        .bind($lease.attempt)
        .bind($now)
        .execute(&mut *$tx)
        .await
        .map($crate::store::changed_one)
    };
}
pub(crate) use hold_job_lease;
