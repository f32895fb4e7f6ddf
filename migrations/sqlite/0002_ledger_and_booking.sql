-- The idempotent executor's ledger and the booking domain.

CREATE TABLE agent_tool_executions (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant_id       INTEGER NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    idempotency_key TEXT    NOT NULL,
    tool            TEXT    NOT NULL,
    fingerprint     TEXT    NOT NULL,
    arguments       TEXT    NOT NULL,
    conversation_id INTEGER NOT NULL,
    contact_id      INTEGER NOT NULL,
    turn_id         INTEGER,
    tool_use_id     TEXT,
    -- A token unique to the call that inserted the row: tells a fresh reservation from a repeat.
    reserved_by     TEXT    NOT NULL,
    -- running | succeeded | failed_transient | failed_permanent | outcome_unknown | superseded
    status          TEXT    NOT NULL,
    result          TEXT,
    error           TEXT,
    generation      INTEGER NOT NULL,
    locked_until    TEXT,
    replay_count    INTEGER NOT NULL DEFAULT 0,
    created_at      TEXT    NOT NULL,
    updated_at      TEXT    NOT NULL,
    completed_at    TEXT,
    UNIQUE (tenant_id, idempotency_key)
);
CREATE INDEX agent_tool_executions_conversation ON agent_tool_executions (tenant_id, conversation_id, id);
CREATE INDEX agent_tool_executions_prune ON agent_tool_executions (updated_at)
    WHERE status IN ('succeeded', 'failed_permanent', 'failed_transient', 'superseded');

ALTER TABLE tenants ADD COLUMN min_notice_minutes INTEGER NOT NULL DEFAULT 60;
ALTER TABLE tenants ADD COLUMN horizon_days INTEGER NOT NULL DEFAULT 30;
ALTER TABLE tenants ADD COLUMN slot_step_minutes INTEGER NOT NULL DEFAULT 30;

CREATE TABLE services (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant_id        INTEGER NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    name             TEXT    NOT NULL,
    duration_minutes INTEGER NOT NULL,
    buffer_minutes   INTEGER NOT NULL,
    price_cents      INTEGER NOT NULL,
    active           BOOLEAN NOT NULL,
    UNIQUE (tenant_id, name)
);

-- hours: {"mon": [["09:00","12:00"], ...], ...}; time_off: [["2026-12-24T00:00","2026-12-26T00:00"], ...]
-- (local times in the tenant's zone).
CREATE TABLE professionals (
    id        INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant_id INTEGER NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    name      TEXT    NOT NULL,
    hours     TEXT    NOT NULL,
    time_off  TEXT    NOT NULL,
    active    BOOLEAN NOT NULL,
    UNIQUE (tenant_id, name)
);

CREATE TABLE professional_services (
    tenant_id       INTEGER NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    professional_id INTEGER NOT NULL REFERENCES professionals (id) ON DELETE CASCADE,
    service_id      INTEGER NOT NULL REFERENCES services (id) ON DELETE CASCADE,
    PRIMARY KEY (professional_id, service_id)
);

-- status: held | confirmed | cancelled | no_show. ends_at includes the service's buffer.
CREATE TABLE appointments (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant_id       INTEGER NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    contact_id      INTEGER NOT NULL REFERENCES contacts (id) ON DELETE CASCADE,
    service_id      INTEGER NOT NULL REFERENCES services (id),
    professional_id INTEGER NOT NULL REFERENCES professionals (id),
    starts_at       TEXT    NOT NULL,
    ends_at         TEXT    NOT NULL,
    status          TEXT    NOT NULL,
    price_cents     INTEGER NOT NULL,
    idempotency_key TEXT,
    created_at      TEXT    NOT NULL,
    updated_at      TEXT    NOT NULL,
    UNIQUE (tenant_id, idempotency_key)
);
CREATE INDEX appointments_professional ON appointments (professional_id, starts_at) WHERE status IN ('held', 'confirmed');
CREATE INDEX appointments_contact ON appointments (tenant_id, contact_id, starts_at);

-- No two active appointments of one professional overlap ([starts_at, ends_at) half-open, so
-- back-to-back is fine). SQLite has one writer at a time, so this check cannot race.
CREATE TRIGGER appointments_no_overlap_insert BEFORE INSERT ON appointments
WHEN NEW.status IN ('held', 'confirmed')
BEGIN
    SELECT RAISE(ABORT, 'appointment_overlap')
    WHERE EXISTS (
        SELECT 1 FROM appointments a
        WHERE a.professional_id = NEW.professional_id AND a.status IN ('held', 'confirmed')
          AND a.starts_at < NEW.ends_at AND NEW.starts_at < a.ends_at
          -- BEFORE triggers run ahead of ON CONFLICT: a re-insert under the same key is a
          -- no-op there, not an overlap.
          AND NOT (NEW.idempotency_key IS NOT NULL AND a.tenant_id = NEW.tenant_id
                   AND a.idempotency_key IS NEW.idempotency_key));
END;

CREATE TRIGGER appointments_no_overlap_update BEFORE UPDATE OF starts_at, ends_at, status, professional_id ON appointments
WHEN NEW.status IN ('held', 'confirmed')
BEGIN
    SELECT RAISE(ABORT, 'appointment_overlap')
    WHERE EXISTS (
        SELECT 1 FROM appointments a
        WHERE a.id <> NEW.id AND a.professional_id = NEW.professional_id AND a.status IN ('held', 'confirmed')
          AND a.starts_at < NEW.ends_at AND NEW.starts_at < a.ends_at);
END;
