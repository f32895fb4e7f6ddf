-- Payment notifications from Pix providers, stored once each (unique provider event id, or the
-- Pix endToEndId for Bacen callbacks) and processed after the webhook is answered.

-- status: received -> processed | unmatched | alerted (or back to received with attempts + 1).
CREATE TABLE payment_events (
    id           BIGSERIAL PRIMARY KEY,
    tenant_id    BIGINT  NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    provider     TEXT    NOT NULL,
    event_id     TEXT    NOT NULL,
    -- How the notification names its charge: txid | provider_ref.
    ref_kind     TEXT    NOT NULL,
    charge_ref   TEXT    NOT NULL,
    status       TEXT    NOT NULL,
    charge_id    BIGINT,
    attempts     BIGINT  NOT NULL DEFAULT 0,
    last_error   TEXT,
    next_attempt_at TIMESTAMPTZ NOT NULL,
    received_at TIMESTAMPTZ NOT NULL,
    processed_at TIMESTAMPTZ,
    UNIQUE (tenant_id, provider, event_id)
);
CREATE INDEX payment_events_due ON payment_events (next_attempt_at) WHERE status = 'received';

ALTER TABLE charges ADD COLUMN end_to_end_id TEXT;
-- When the provider was last asked about a pending charge (the poller).
ALTER TABLE charges ADD COLUMN checked_at TIMESTAMPTZ;
CREATE INDEX charges_pending ON charges (created_at) WHERE status = 'pending';
CREATE INDEX charges_provider_ref ON charges (tenant_id, provider_ref);
