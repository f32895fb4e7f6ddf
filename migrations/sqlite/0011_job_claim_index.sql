-- The claim's "no open sibling in this conversation" probe reads open jobs by conversation.
-- Found by the fault-injection campaign on PostgreSQL: with `jobs_lease` (locked_until, every
-- lease renewal a new entry) bloated faster than autovacuum cleaned it under load, the planner
-- ANDed it into that probe and a claim took 600 ms over 45,000 finished jobs; with this index and
-- without that one it takes 0.3 ms. The lease sweep (running jobs past their lease) reads the
-- same small partial index, and renewals no longer grow an index of their own.
DROP INDEX jobs_lease;
CREATE INDEX jobs_open ON jobs (conversation_id, id) WHERE state IN ('available', 'retryable', 'running');
