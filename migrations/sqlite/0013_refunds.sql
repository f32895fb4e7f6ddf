-- Refunds (devoluções) of paid charges, each one a confirmed refund action executed through the
-- ledger. A charge keeps two sums: what confirmed refunds hold back (refund_reserved_cents, raised
-- by one conditional update that never lets it pass the charge's amount, so two refunds racing
-- for the same money cannot both go out) and what the provider confirmed given back
-- (refunded_cents). refund_offered_at records that a charge due for a refund (paid too late)
-- was offered to the staff with buttons.
ALTER TABLE charges ADD COLUMN refund_reserved_cents INTEGER NOT NULL DEFAULT 0;
ALTER TABLE charges ADD COLUMN refunded_cents INTEGER NOT NULL DEFAULT 0;
ALTER TABLE charges ADD COLUMN refund_offered_at TEXT;
CREATE INDEX charges_refund_unoffered ON charges (id) WHERE status = 'refund_due' AND refund_offered_at IS NULL;

CREATE TABLE refunds (
    id                       INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant_id                INTEGER NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    charge_id                INTEGER NOT NULL REFERENCES charges (id),
    -- The confirmed refund action it executes.
    action_id                TEXT NOT NULL REFERENCES pending_actions (id),
    -- One offer sent to several staff members (the console's, a late payment's) is one refund,
    -- whoever confirms it: their actions share this id.
    offer_id                 TEXT,
    idempotency_key          TEXT NOT NULL,
    -- Our id for it at the provider, derived from the key (Bacen's devolução id, Mercado Pago's
    -- idempotency key, the marker in Asaas's description).
    refund_id                TEXT NOT NULL,
    gateway                  TEXT NOT NULL,
    provider_ref             TEXT,
    amount_cents             INTEGER NOT NULL CHECK (amount_cents > 0),
    -- processing | done | failed
    status                   TEXT NOT NULL,
    reason                   TEXT,
    -- Where the staff member who confirmed it is told.
    merchant_conversation_id INTEGER REFERENCES conversations (id),
    created_at               TEXT NOT NULL,
    updated_at               TEXT NOT NULL,
    settled_at               TEXT,
    UNIQUE (tenant_id, idempotency_key),
    UNIQUE (tenant_id, refund_id),
    UNIQUE (tenant_id, action_id),
    UNIQUE (tenant_id, offer_id)
);
CREATE INDEX refunds_of_charge ON refunds (tenant_id, charge_id);
CREATE INDEX refunds_processing ON refunds (updated_at) WHERE status = 'processing';
