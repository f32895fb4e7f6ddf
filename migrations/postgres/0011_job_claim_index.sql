-- The claim's "no open sibling in this conversation" probe reads open jobs by conversation.
-- Found by the fault-injection campaign on PostgreSQL: the planner ANDed `jobs_lease`
-- (locked_until of running jobs; every lease renewal adds an entry until vacuum removes the old
-- one) into that probe, and with the index at 72,000 entries for 31 running jobs a claim took
-- 600 ms. Keyed by conversation first, the probe visits only that conversation's entries: 0.3 ms
-- on the same database. The lease sweep (running jobs past their lease) reads the same small
-- partial index.
DROP INDEX jobs_lease;
CREATE INDEX jobs_open ON jobs (conversation_id, id) WHERE state IN ('available', 'retryable', 'running');
