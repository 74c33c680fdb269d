-- Pairing codes of platform connect: one-time, short-lived, stored only as
-- the SHA-256 of the code. A lookup deletes the row it answers.
CREATE TABLE pairing_codes (
	hash       BLOB PRIMARY KEY CHECK (length(hash) = 32),
	issuer     TEXT NOT NULL,
	audience   TEXT NOT NULL,
	jwks_url   TEXT NOT NULL,
	created_by TEXT NOT NULL,
	created_at INTEGER NOT NULL,
	expires_at INTEGER NOT NULL
) STRICT;

CREATE INDEX pairing_codes_expires ON pairing_codes (expires_at);
