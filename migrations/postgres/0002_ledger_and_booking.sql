-- The idempotent executor's ledger and the booking domain.

CREATE TABLE agent_tool_executions (
    id              BIGSERIAL PRIMARY KEY,
    tenant_id       BIGINT  NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    idempotency_key TEXT    NOT NULL,
    tool            TEXT    NOT NULL,
    fingerprint     TEXT    NOT NULL,
    arguments       JSONB   NOT NULL,
    conversation_id BIGINT  NOT NULL,
    contact_id      BIGINT  NOT NULL,
    turn_id         BIGINT,
    tool_use_id     TEXT,
    -- A token unique to the call that inserted the row: tells a fresh reservation from a repeat.
    reserved_by     TEXT    NOT NULL,
    -- running | succeeded | failed_transient | failed_permanent | outcome_unknown | superseded
    status          TEXT    NOT NULL,
    result          JSONB,
    error           TEXT,
    generation      BIGINT  NOT NULL,
    locked_until    TIMESTAMPTZ,
    replay_count    BIGINT  NOT NULL DEFAULT 0,
    created_at      TIMESTAMPTZ NOT NULL,
    updated_at      TIMESTAMPTZ NOT NULL,
    completed_at    TIMESTAMPTZ,
    UNIQUE (tenant_id, idempotency_key)
);
CREATE INDEX agent_tool_executions_conversation ON agent_tool_executions (tenant_id, conversation_id, id);
CREATE INDEX agent_tool_executions_prune ON agent_tool_executions (updated_at)
    WHERE status IN ('succeeded', 'failed_permanent', 'failed_transient', 'superseded');

ALTER TABLE tenants ADD COLUMN min_notice_minutes BIGINT NOT NULL DEFAULT 60;
ALTER TABLE tenants ADD COLUMN horizon_days BIGINT NOT NULL DEFAULT 30;
ALTER TABLE tenants ADD COLUMN slot_step_minutes BIGINT NOT NULL DEFAULT 30;

CREATE TABLE services (
    id               BIGSERIAL PRIMARY KEY,
    tenant_id        BIGINT  NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    name             TEXT    NOT NULL,
    duration_minutes BIGINT  NOT NULL,
    buffer_minutes   BIGINT  NOT NULL,
    price_cents      BIGINT  NOT NULL,
    active           BOOLEAN NOT NULL,
    UNIQUE (tenant_id, name)
);

CREATE TABLE professionals (
    id        BIGSERIAL PRIMARY KEY,
    tenant_id BIGINT  NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    name      TEXT    NOT NULL,
    hours     JSONB   NOT NULL,
    time_off  JSONB   NOT NULL,
    active    BOOLEAN NOT NULL,
    UNIQUE (tenant_id, name)
);

CREATE TABLE professional_services (
    tenant_id       BIGINT NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    professional_id BIGINT NOT NULL REFERENCES professionals (id) ON DELETE CASCADE,
    service_id      BIGINT NOT NULL REFERENCES services (id) ON DELETE CASCADE,
    PRIMARY KEY (professional_id, service_id)
);

CREATE TABLE appointments (
    id              BIGSERIAL PRIMARY KEY,
    tenant_id       BIGINT  NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    contact_id      BIGINT  NOT NULL REFERENCES contacts (id) ON DELETE CASCADE,
    service_id      BIGINT  NOT NULL REFERENCES services (id),
    professional_id BIGINT  NOT NULL REFERENCES professionals (id),
    starts_at       TIMESTAMPTZ NOT NULL,
    ends_at         TIMESTAMPTZ NOT NULL,
    status          TEXT    NOT NULL,
    price_cents     BIGINT  NOT NULL,
    idempotency_key TEXT,
    created_at      TIMESTAMPTZ NOT NULL,
    updated_at      TIMESTAMPTZ NOT NULL,
    UNIQUE (tenant_id, idempotency_key),
    -- No two active appointments of one professional overlap. Both columns are ranges (a
    -- one-point int8range for the professional), so GiST needs no btree_gist extension.
    CONSTRAINT appointments_no_overlap EXCLUDE USING gist (
        int8range(professional_id, professional_id, '[]') WITH &&,
        tstzrange(starts_at, ends_at, '[)') WITH &&
    ) WHERE (status IN ('held', 'confirmed'))
);
CREATE INDEX appointments_contact ON appointments (tenant_id, contact_id, starts_at);
