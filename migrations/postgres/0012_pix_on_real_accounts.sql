-- A contact's key is its number's match key: a Brazilian mobile (55, area code, 9, eight digits
-- starting 6 to 9) without the ninth digit, since WhatsApp reports many of them without it. Rows
-- keyed with the digit take the short key, unless a contact already has it (those two stay apart;
-- merging people is for an operator to decide).
UPDATE contacts
SET external_key = substr(external_key, 1, 4) || substr(external_key, 6)
WHERE length(external_key) = 13
  AND external_key ~ '^[0-9]+$'
  AND substr(external_key, 1, 2) = '55'
  AND substr(external_key, 3, 1) <> '0'
  AND substr(external_key, 4, 1) <> '0'
  AND substr(external_key, 5, 1) = '9'
  AND substr(external_key, 6, 1) IN ('6', '7', '8', '9')
  AND NOT EXISTS (
      SELECT 1 FROM contacts other
      WHERE other.tenant_id = contacts.tenant_id
        AND other.external_key = substr(contacts.external_key, 1, 4) || substr(contacts.external_key, 6)
  );

-- The payer's CPF or CNPJ, which some Pix providers require to charge (personal data: exported
-- and erased with the contact).
ALTER TABLE contacts ADD COLUMN payer_document TEXT;

-- A charge that can no longer be paid here (expired, or cancelled with its booking) is withdrawn
-- at its provider too, once; withdrawn_at records that it was. Charges closed before this was
-- done count as withdrawn (the provider's own expiry applied to them).
ALTER TABLE charges ADD COLUMN withdrawn_at TIMESTAMPTZ;
UPDATE charges SET withdrawn_at = updated_at WHERE status IN ('expired', 'cancelled');
CREATE INDEX charges_to_withdraw ON charges (id)
    WHERE status IN ('expired', 'cancelled') AND withdrawn_at IS NULL AND gateway <> 'sandbox';
-- Calls a dead worker left unsettled, which the withdrawal and deposit sweeps finish.
CREATE INDEX agent_tool_executions_unsettled ON agent_tool_executions (tool, id)
    WHERE status IN ('running', 'outcome_unknown');
