-- Hardening: a second factor that holds against many sources, and the owner told of it.

-- Wrong TOTP codes typed behind a right password, per admin (any source): counted by the
-- throttle of the second factor, shown to the owner at their next login.
CREATE TABLE totp_failures (
    id        INTEGER PRIMARY KEY AUTOINCREMENT,
    admin_id  INTEGER NOT NULL REFERENCES admins (id) ON DELETE CASCADE,
    source    TEXT    NOT NULL,
    failed_at TEXT NOT NULL
);
CREATE INDEX totp_failures_admin ON totp_failures (admin_id, failed_at);

-- The staff number the admin is (told on WhatsApp when their codes are being guessed), and
-- when they last logged in (what the console's notice counts from).
ALTER TABLE admins ADD COLUMN phone TEXT;
ALTER TABLE admins ADD COLUMN last_login_at TEXT;

-- Recently erased contacts, watched for writes that raced their erasure.
CREATE INDEX contacts_erased ON contacts (erased_at) WHERE erased_at IS NOT NULL;
