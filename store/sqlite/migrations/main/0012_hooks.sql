-- Inbound notification hooks: endpoints, shared verification profiles and
-- delivery receipts. Secrets are stored sealed under the KEK by the server
-- ({v, ct, iv} JSON); this store never sees them in the clear. Targets,
-- filters and policy are JSON the server validated. Deleting an endpoint
-- deletes its receipts; a profile cannot be deleted while an endpoint
-- references it (the foreign key refuses).

CREATE TABLE hook_profiles (
	slug        TEXT PRIMARY KEY,
	description TEXT NOT NULL DEFAULT '',
	auth_kind   TEXT NOT NULL,
	auth_header TEXT NOT NULL DEFAULT '',
	auth_prefix TEXT NOT NULL DEFAULT '',
	secret      BLOB,                 -- sealed secret; NULL when none
	created_at  INTEGER NOT NULL,
	updated_at  INTEGER NOT NULL
) STRICT;

CREATE TABLE hook_endpoints (
	slug          TEXT PRIMARY KEY,
	display_name  TEXT    NOT NULL DEFAULT '',
	targets       TEXT    NOT NULL DEFAULT '[]', -- JSON array of {member} / {channel: id}
	auth_kind     TEXT    NOT NULL DEFAULT '',
	auth_header   TEXT    NOT NULL DEFAULT '',
	auth_prefix   TEXT    NOT NULL DEFAULT '',
	auth_profile  TEXT    REFERENCES hook_profiles (slug) ON DELETE RESTRICT,
	filters       TEXT    NOT NULL DEFAULT '[]', -- JSON array of {path, op, value}
	template      TEXT    NOT NULL DEFAULT '',
	policy        TEXT    NOT NULL DEFAULT '{}', -- JSON object
	dedupe_header TEXT    NOT NULL DEFAULT '',
	enabled       INTEGER NOT NULL,
	level         TEXT    NOT NULL,
	secret        BLOB,                          -- sealed secret; NULL when none
	created_at    INTEGER NOT NULL,
	updated_at    INTEGER NOT NULL
) STRICT;

CREATE INDEX hook_endpoints_profile ON hook_endpoints (auth_profile);

CREATE TABLE hook_deliveries (
	id          TEXT PRIMARY KEY,
	endpoint    TEXT    NOT NULL REFERENCES hook_endpoints (slug) ON DELETE CASCADE,
	status      TEXT    NOT NULL,
	reason      TEXT    NOT NULL DEFAULT '',
	dedupe_key  TEXT    NOT NULL DEFAULT '',
	message_ids TEXT    NOT NULL DEFAULT '[]', -- JSON array of message ids
	received_at INTEGER NOT NULL,
	size        INTEGER NOT NULL,
	body        BLOB    NOT NULL,              -- the raw request body, at most 256 KiB
	if_offline  TEXT    NOT NULL DEFAULT '',   -- per-delivery overrides; '' when none
	if_busy     TEXT    NOT NULL DEFAULT '',
	level       TEXT    NOT NULL DEFAULT ''
) STRICT;

CREATE INDEX hook_deliveries_endpoint ON hook_deliveries (endpoint, received_at);
CREATE INDEX hook_deliveries_dedupe ON hook_deliveries (endpoint, dedupe_key, received_at) WHERE dedupe_key <> '';
