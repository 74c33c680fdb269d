-- Members mirror the team config file; every other table references them by
-- name so that removing a member from the config removes what hangs off it.
CREATE TABLE members (
	name         TEXT PRIMARY KEY,
	role         TEXT,                        -- JSON {"title","description"}; NULL when the member has no role
	instructions TEXT    NOT NULL DEFAULT '',
	permissions  TEXT    NOT NULL DEFAULT '[]', -- JSON array of strings
	created_at   INTEGER NOT NULL,            -- epoch ms
	updated_at   INTEGER NOT NULL             -- epoch ms
) STRICT;

-- Tokens are kept after a revoke (revoked_at set) so that a hash seeded from
-- the config file is never revived. Times are epoch ms, NULL for zero.
CREATE TABLE tokens (
	id           TEXT PRIMARY KEY,
	member       TEXT    NOT NULL REFERENCES members (name) ON DELETE CASCADE,
	hash         BLOB    NOT NULL UNIQUE,     -- SHA-256 of the plaintext
	label        TEXT    NOT NULL DEFAULT '',
	origin       TEXT    NOT NULL DEFAULT '',
	created_at   INTEGER NOT NULL,
	created_by   TEXT    NOT NULL DEFAULT '',
	last_used_at INTEGER,
	expires_at   INTEGER,
	revoked_at   INTEGER
) STRICT;

CREATE INDEX tokens_member ON tokens (member);

CREATE TABLE sessions (
	hash         BLOB PRIMARY KEY,            -- SHA-256 of the cookie value
	member       TEXT    NOT NULL REFERENCES members (name) ON DELETE CASCADE,
	created_at   INTEGER NOT NULL,
	last_seen_at INTEGER NOT NULL,
	expires_at   INTEGER                      -- NULL: never expires
) STRICT;

CREATE INDEX sessions_expires_at ON sessions (expires_at);
-- The cascade from members deletes by member; without this index every
-- member delete would scan the whole sessions table.
CREATE INDEX sessions_member ON sessions (member);
