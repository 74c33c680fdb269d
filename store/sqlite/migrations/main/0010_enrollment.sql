-- Device enrollments (RFC 8628-style). A record lives until its expiry:
-- 300 s from the mint while pending or rejected, 5 minutes from the
-- approval while the issued token waits for the device's poll. The device
-- code is kept only as its SHA-256; the token plaintext only sealed under
-- the KEK. Both lookups are unique indexed exact matches.
CREATE TABLE enrollments (
	id           TEXT    PRIMARY KEY,
	device_hash  BLOB    NOT NULL UNIQUE,      -- SHA-256 of the device code
	user_code    TEXT    NOT NULL UNIQUE,      -- normalized: 8 characters, no dash
	label_hint   TEXT    NOT NULL DEFAULT '',
	source_ip    TEXT    NOT NULL DEFAULT '',
	user_agent   TEXT    NOT NULL DEFAULT '',
	status       TEXT    NOT NULL CHECK (status IN ('pending', 'approved', 'rejected')),
	reason       TEXT    NOT NULL DEFAULT '',  -- rejected: shown to the device
	created_at   INTEGER NOT NULL,             -- epoch ms
	expires_at   INTEGER NOT NULL,             -- epoch ms
	interval_ms  INTEGER NOT NULL,             -- the device's poll interval
	last_poll_at INTEGER,                      -- epoch ms; NULL before the first poll
	member       TEXT    NOT NULL DEFAULT '',  -- approved: whom the token authenticates
	token_id     TEXT    NOT NULL DEFAULT '',  -- approved: the token minted for this record
	sealed_token TEXT    NOT NULL DEFAULT ''   -- approved: the plaintext sealed under the KEK (JSON)
) STRICT;

-- The sweep deletes by expiry.
CREATE INDEX enrollments_expires_at ON enrollments (expires_at);
