-- Booking deposits: a service may ask for a deposit; booking it holds the appointment
-- (`held`, counted by the no-overlap rule) until the deposit's Pix is paid (`confirmed`) or the
-- hold runs out (`expired`, not counted: the slot is free again).

-- The deposit in cents (0: none), computed from the tenant file (an amount or a percentage).
ALTER TABLE services ADD COLUMN deposit_cents BIGINT NOT NULL DEFAULT 0;
-- How long a hold waits for its deposit.
ALTER TABLE tenants ADD COLUMN deposit_minutes BIGINT NOT NULL DEFAULT 30;

-- status: held | confirmed | cancelled | expired | no_show. A held appointment carries the
-- deposit it waits for (copied at booking, like its price) and when the hold runs out.
ALTER TABLE appointments ADD COLUMN deposit_cents BIGINT NOT NULL DEFAULT 0;
ALTER TABLE appointments ADD COLUMN hold_expires_at TIMESTAMPTZ;
CREATE INDEX appointments_holds ON appointments (hold_expires_at) WHERE status = 'held';

-- At most one deposit charge per appointment.
CREATE UNIQUE INDEX charges_deposit ON charges (tenant_id, appointment_id) WHERE appointment_id IS NOT NULL;
-- A deposit paid after its hold was lost, for a slot taken meanwhile, is recorded as charge
-- status `refund_due` (pending -> paid | expired | cancelled | refund_due): the money arrived
-- and the merchant was told to give it back.
