-- Message pipeline: tenants, contacts, conversations, inbound messages, the turn queue and the outbox.
-- Timestamps are RFC 3339 text written by the application (never SQL-side now()), so they sort as text.

CREATE TABLE tenants (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    slug            TEXT    NOT NULL UNIQUE,
    name            TEXT    NOT NULL,
    timezone        TEXT    NOT NULL,
    phone_number_id TEXT    NOT NULL UNIQUE,
    access_token    TEXT,
    created_at      TEXT    NOT NULL,
    updated_at      TEXT    NOT NULL
);

CREATE TABLE staff (
    tenant_id  INTEGER NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    phone      TEXT    NOT NULL,
    created_at TEXT    NOT NULL,
    PRIMARY KEY (tenant_id, phone)
);

-- external_key is the wa_id when WhatsApp sent one, else the business-scoped user id.
CREATE TABLE contacts (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant_id    INTEGER NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    external_key TEXT    NOT NULL,
    wa_id        TEXT,
    user_id      TEXT,
    username     TEXT,
    profile_name TEXT,
    created_at   TEXT    NOT NULL,
    updated_at   TEXT    NOT NULL,
    UNIQUE (tenant_id, external_key)
);

CREATE TABLE conversations (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant_id       INTEGER NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    contact_id      INTEGER NOT NULL REFERENCES contacts (id) ON DELETE CASCADE,
    created_at      TEXT    NOT NULL,
    UNIQUE (tenant_id, contact_id)
);

-- turn_id is the job that answers the message; it is set once, at that job's first claim.
CREATE TABLE inbound_messages (
    id                  INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant_id           INTEGER NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    conversation_id     INTEGER NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    provider_message_id TEXT    NOT NULL,
    kind                TEXT    NOT NULL,
    body                TEXT,
    reply_id            TEXT,
    context_id          TEXT,
    sent_at             TEXT,
    received_at         TEXT    NOT NULL,
    turn_id             INTEGER,
    raw                 TEXT    NOT NULL,
    UNIQUE (tenant_id, provider_message_id)
);
CREATE INDEX inbound_messages_turn ON inbound_messages (tenant_id, conversation_id, turn_id);

-- state: available | running | retryable | completed | dead
CREATE TABLE jobs (
    id                 INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant_id          INTEGER NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    conversation_id    INTEGER NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    state              TEXT    NOT NULL,
    run_at             TEXT    NOT NULL,
    debounce_deadline  TEXT    NOT NULL,
    attempts           INTEGER NOT NULL DEFAULT 0,
    max_attempts       INTEGER NOT NULL,
    locked_by          TEXT,
    locked_until       TEXT,
    last_error         TEXT,
    trigger_message_id TEXT,
    created_at         TEXT    NOT NULL,
    updated_at         TEXT    NOT NULL,
    finished_at        TEXT
);
-- Debounce: at most one not-yet-claimed turn per conversation; new messages join it.
CREATE UNIQUE INDEX jobs_debounce ON jobs (tenant_id, conversation_id) WHERE state = 'available';
CREATE INDEX jobs_due ON jobs (run_at, id) WHERE state IN ('available', 'retryable');
CREATE INDEX jobs_conversation ON jobs (conversation_id, state);
CREATE INDEX jobs_lease ON jobs (locked_until) WHERE state = 'running';
CREATE INDEX jobs_finished ON jobs (finished_at) WHERE state IN ('completed', 'dead');

-- status: local | pending | sending | unknown | sent | delivered | read | failed
CREATE TABLE outbound_messages (
    id                  INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant_id           INTEGER NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    conversation_id     INTEGER NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    idempotency_key     TEXT    NOT NULL,
    to_wa_id            TEXT,
    to_user_id          TEXT,
    message             TEXT    NOT NULL,
    status              TEXT    NOT NULL,
    provider_message_id TEXT,
    attempts            INTEGER NOT NULL DEFAULT 0,
    next_attempt_at     TEXT    NOT NULL,
    last_error          TEXT,
    created_at          TEXT    NOT NULL,
    updated_at          TEXT    NOT NULL,
    sent_at             TEXT,
    UNIQUE (tenant_id, idempotency_key)
);
CREATE INDEX outbound_messages_due ON outbound_messages (next_attempt_at, id)
    WHERE status IN ('pending', 'sending', 'unknown');
CREATE INDEX outbound_messages_provider ON outbound_messages (tenant_id, provider_message_id);
CREATE INDEX outbound_messages_conversation ON outbound_messages (conversation_id, id);
