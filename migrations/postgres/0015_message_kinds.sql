-- Every kind of message a customer can send (reactions, edits, deletions, number changes,
-- media, voice notes, error-only messages): what the intake keeps beside kind, body and the
-- referred message (context_id), and a voice note's transcript, made once per message.

-- The Graph media id of a voice note or audio, fetched for transcription.
ALTER TABLE inbound_messages ADD COLUMN media_id TEXT;
-- Meta's error code on an unsupported or error-only message (131051, 131000, ...).
ALTER TABLE inbound_messages ADD COLUMN error_code BIGINT;
-- A voice note's text (personal data: exported and erased with the message), or why it could
-- not be heard; at most one of them is ever set, once.
ALTER TABLE inbound_messages ADD COLUMN transcript TEXT;
ALTER TABLE inbound_messages ADD COLUMN transcript_error TEXT;
