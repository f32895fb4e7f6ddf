-- A contact is found by any identity it has shown: its key, its wa_id, or its business-scoped
-- user id (attached when a message carries both), so a customer who later writes with only
-- the user id stays the same contact.
CREATE INDEX contacts_wa_id ON contacts (tenant_id, wa_id) WHERE wa_id IS NOT NULL;
CREATE INDEX contacts_user_id ON contacts (tenant_id, user_id) WHERE user_id IS NOT NULL;
