-- Console and simulator reads that would otherwise scan a tenant's whole table.

-- The simulator's live stream of one contact's replies (polled while a page is open).
CREATE INDEX outbound_messages_recipient ON outbound_messages (tenant_id, to_wa_id, id);
-- "Falhas": failed sends and dead jobs, newest first.
CREATE INDEX outbound_messages_failed ON outbound_messages (tenant_id, updated_at) WHERE status = 'failed';
CREATE INDEX jobs_dead ON jobs (tenant_id, updated_at) WHERE state = 'dead';
-- "Pendentes": a tenant's actions, newest first.
CREATE INDEX pending_actions_tenant ON pending_actions (tenant_id, created_at);
