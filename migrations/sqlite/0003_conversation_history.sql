-- The model's conversation history: each turn's messages, written once when the turn has
-- answered. `content` holds provider-neutral blocks and, for assistant messages, the
-- provider's own JSON to send back verbatim.
CREATE TABLE conversation_messages (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant_id       INTEGER NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    conversation_id INTEGER NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    turn_id         INTEGER NOT NULL,
    seq             INTEGER NOT NULL,
    role            TEXT    NOT NULL,
    provider        TEXT    NOT NULL,
    content         TEXT    NOT NULL,
    created_at      TEXT    NOT NULL,
    UNIQUE (tenant_id, turn_id, seq)
);
CREATE INDEX conversation_messages_history ON conversation_messages (tenant_id, conversation_id, turn_id, seq);
