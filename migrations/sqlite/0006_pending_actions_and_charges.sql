-- Pending actions (confirmed by a button, never by the model), Pix charges and reminders.

-- A job is a `turn` (the conversation's messages, answered by the agent) or a `click` (one
-- button click on a pending action, answered without the model). Only turns debounce.
ALTER TABLE jobs ADD COLUMN kind TEXT NOT NULL DEFAULT 'turn';
DROP INDEX jobs_debounce;
CREATE UNIQUE INDEX jobs_debounce ON jobs (tenant_id, conversation_id) WHERE state = 'available' AND kind = 'turn';

-- Settings from the tenant file beyond the columns above ([pix], templates, reminders), as JSON.
ALTER TABLE tenants ADD COLUMN settings TEXT NOT NULL DEFAULT '{}';

-- The guided menu's place in a multi-step form (the merchant's "Nova cobrança").
ALTER TABLE conversations ADD COLUMN menu_state TEXT;

-- status: pending -> confirmed -> executed | failed, or pending -> declined | expired | superseded.
-- subject names what the action is about (`appointment:42`, `customer:+5511...`): a new
-- proposal of the same kind about the same subject in the same conversation supersedes the
-- pending one, so at most one is pending (the partial unique index).
CREATE TABLE pending_actions (
    id               TEXT    PRIMARY KEY,
    tenant_id        INTEGER  NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    conversation_id  INTEGER  NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    kind             TEXT    NOT NULL,
    subject          TEXT    NOT NULL,
    payload          TEXT   NOT NULL,
    fingerprint      TEXT    NOT NULL,
    status           TEXT    NOT NULL,
    expires_at TEXT NOT NULL,
    -- What the person was asked, and the outbox key of the message that asked it (its wamid
    -- is on that row).
    offer_text       TEXT    NOT NULL,
    -- The message whose turn proposed it: a typed confirmation must come from a later one.
    proposed_by      TEXT,
    offer_key        TEXT,
    confirmed_via    TEXT,
    confirmed_by     INTEGER,
    confirmed_message TEXT,
    result           TEXT,
    error            TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    decided_at TEXT
);
CREATE UNIQUE INDEX pending_actions_open ON pending_actions (tenant_id, conversation_id, kind, subject)
    WHERE status = 'pending';
CREATE INDEX pending_actions_expiry ON pending_actions (expires_at) WHERE status = 'pending';
CREATE INDEX pending_actions_conversation ON pending_actions (tenant_id, conversation_id, created_at);

-- status: pending -> paid | expired | cancelled. One charge per idempotency key (the ledger key
-- of the confirmed action) and per txid.
CREATE TABLE charges (
    id                       INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant_id                INTEGER  NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    -- The merchant's confirmed action, or (a booking deposit) the appointment it holds.
    action_id                TEXT    REFERENCES pending_actions (id),
    appointment_id           INTEGER  REFERENCES appointments (id),
    idempotency_key          TEXT    NOT NULL,
    txid                     TEXT    NOT NULL,
    gateway                  TEXT    NOT NULL,
    provider_ref             TEXT,
    amount_cents             INTEGER  NOT NULL CHECK (amount_cents > 0),
    description              TEXT    NOT NULL,
    customer_phone           TEXT    NOT NULL,
    customer_conversation_id INTEGER  NOT NULL REFERENCES conversations (id),
    merchant_conversation_id INTEGER  REFERENCES conversations (id),
    status                   TEXT    NOT NULL,
    copia_e_cola             TEXT    NOT NULL,
    -- How the customer was reached: text | order | template.
    delivery                 TEXT    NOT NULL,
    expires_at TEXT NOT NULL,
    paid_at TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    UNIQUE (tenant_id, idempotency_key),
    UNIQUE (tenant_id, txid)
);
CREATE INDEX charges_created ON charges (tenant_id, created_at);

-- When the customer confirmed attendance through a reminder.
ALTER TABLE appointments ADD COLUMN attendance_confirmed_at TEXT;

-- One reminder per appointment, start and offset: a moved appointment gets its own.
CREATE TABLE reminders (
    tenant_id      INTEGER  NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    appointment_id INTEGER  NOT NULL REFERENCES appointments (id) ON DELETE CASCADE,
    starts_at TEXT NOT NULL,
    offset_minutes INTEGER  NOT NULL,
    action_id      TEXT,
    created_at TEXT NOT NULL,
    PRIMARY KEY (tenant_id, appointment_id, starts_at, offset_minutes)
);
