-- The job attempt that wrote a row. A later attempt of the same turn may take over a ledger
-- row left `running` by an earlier one at once; outbox and history rows record which attempt,
-- holding the job's lease, wrote them.
ALTER TABLE agent_tool_executions ADD COLUMN turn_attempt BIGINT;
ALTER TABLE outbound_messages ADD COLUMN turn_attempt BIGINT;
ALTER TABLE conversation_messages ADD COLUMN turn_attempt BIGINT;

-- Refusals about the world as it was (slot taken, outside hours) release their key: they are
-- settled as `refused` and pruned like any settled row.
DROP INDEX agent_tool_executions_prune;
CREATE INDEX agent_tool_executions_prune ON agent_tool_executions (updated_at)
    WHERE status IN ('succeeded', 'failed_permanent', 'failed_transient', 'superseded', 'refused');

-- What a settled row's effect is about (`appointment:42`): moving or cancelling that thing
-- supersedes every row that describes it, whichever tool and key wrote it.
ALTER TABLE agent_tool_executions ADD COLUMN subject TEXT;
CREATE INDEX agent_tool_executions_subject ON agent_tool_executions (tenant_id, subject);
