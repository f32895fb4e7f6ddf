-- The merchant console: admins and the tenants each may see, their sessions, login throttling,
-- each model call's trace, human handoff and LGPD opt-out/erasure.

CREATE TABLE admins (
    id            BIGSERIAL PRIMARY KEY,
    email         TEXT      NOT NULL UNIQUE,
    -- argon2id, PHC string format.
    password_hash TEXT      NOT NULL,
    created_at TIMESTAMPTZ  NOT NULL,
    updated_at TIMESTAMPTZ  NOT NULL
);

-- An admin sees only the tenants listed here.
CREATE TABLE admin_tenants (
    admin_id  BIGINT NOT NULL REFERENCES admins (id) ON DELETE CASCADE,
    tenant_id BIGINT NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    PRIMARY KEY (admin_id, tenant_id)
);

-- tower-sessions' records (the session id is random; data is the serialized record).
CREATE TABLE console_sessions (
    id          TEXT        PRIMARY KEY,
    data        BYTEA       NOT NULL,
    expiry_date TIMESTAMPTZ NOT NULL
);
CREATE INDEX console_sessions_expiry ON console_sessions (expiry_date);

-- Failed logins, per lowercased email: enough of them in a window and the login is throttled,
-- in every server process alike.
CREATE TABLE login_failures (
    id        BIGSERIAL   PRIMARY KEY,
    email     TEXT        NOT NULL,
    failed_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX login_failures_email ON login_failures (email, failed_at);

-- One row per model call of a turn, written with the turn's history (same transaction).
CREATE TABLE model_calls (
    id              BIGSERIAL PRIMARY KEY,
    tenant_id       BIGINT  NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    conversation_id BIGINT  NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    turn_id         BIGINT  NOT NULL,
    seq             INTEGER NOT NULL,
    provider        TEXT    NOT NULL,
    request_id      TEXT,
    -- end_turn | tool_use | max_tokens | refusal | other | error
    stop_reason     TEXT    NOT NULL,
    latency_ms      BIGINT  NOT NULL,
    input_tokens    BIGINT  NOT NULL,
    output_tokens   BIGINT  NOT NULL,
    created_at TIMESTAMPTZ  NOT NULL,
    UNIQUE (tenant_id, turn_id, seq)
);
CREATE INDEX model_calls_conversation ON model_calls (tenant_id, conversation_id, turn_id);

-- Human handoff: while handoff_until is in the future the bot does not answer; each human
-- message (either side) pushes it forward by the idle time, so it ends by itself.
ALTER TABLE conversations ADD COLUMN handoff_until TIMESTAMPTZ;
-- The customer asked for a person ("atendente") and no one took over yet.
ALTER TABLE conversations ADD COLUMN handoff_requested_at TIMESTAMPTZ;

-- LGPD: a contact who wrote "sair"/"parar" gets no reminders or proactive messages; an erased
-- contact keeps its row (appointments and charges point to it) without personal data.
ALTER TABLE contacts ADD COLUMN opted_out_at TIMESTAMPTZ;
ALTER TABLE contacts ADD COLUMN erased_at TIMESTAMPTZ;

-- Console pages: the agenda by day, the conversation list by recency.
CREATE INDEX appointments_tenant_start ON appointments (tenant_id, starts_at);
CREATE INDEX inbound_messages_conversation ON inbound_messages (tenant_id, conversation_id, id);
