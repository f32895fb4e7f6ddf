-- Privacy and trust: erasure tombstones, the simulator's admin attribution, the login throttle
-- by source and the admins' second factor.

-- An erasure's tombstone: a keyed hash of each identity the contact had (never the identity),
-- and when it was erased. A message sent before that instant by one of them is a redelivery of
-- something erased: acknowledged and dropped.
CREATE TABLE erasures (
    tenant_id INTEGER NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    identity  TEXT    NOT NULL,
    erased_at TEXT    NOT NULL,
    PRIMARY KEY (tenant_id, identity)
);

-- Who typed a message in the simulator (an admin's e-mail, or 'local' in local mode); NULL for
-- every message that came from WhatsApp.
ALTER TABLE inbound_messages ADD COLUMN simulated_by TEXT;
-- The admin whose simulator click decided an action, instead of a staff member.
ALTER TABLE pending_actions ADD COLUMN decided_in_simulator TEXT;

-- Failures are counted by e-mail, by source address and by both.
ALTER TABLE login_failures ADD COLUMN source TEXT NOT NULL DEFAULT '';
CREATE INDEX login_failures_source ON login_failures (source, failed_at);

-- The optional TOTP second factor (RFC 6238) and the last time step used (no code twice).
ALTER TABLE admins ADD COLUMN totp_secret TEXT;
ALTER TABLE admins ADD COLUMN totp_last_step INTEGER;
