-- The registries of environment secrets and tool sources. Values and
-- credential secrets are stored sealed under the KEK by the server
-- ({v, ct, iv} JSON); this store never sees them in the clear. Bindings
-- go with their member (a member deleted from the team is unbound).

CREATE TABLE secrets (
	slug        TEXT PRIMARY KEY,
	env_name    TEXT    NOT NULL UNIQUE,
	description TEXT    NOT NULL DEFAULT '',
	enabled     INTEGER NOT NULL,
	all_members INTEGER NOT NULL,
	value       BLOB,                 -- sealed value; NULL when none
	created_at  INTEGER NOT NULL,
	updated_at  INTEGER NOT NULL
) STRICT;

CREATE TABLE secret_bindings (
	slug   TEXT NOT NULL REFERENCES secrets (slug) ON DELETE CASCADE,
	member TEXT NOT NULL REFERENCES members (name) ON DELETE CASCADE,
	PRIMARY KEY (slug, member)
) STRICT, WITHOUT ROWID;

CREATE INDEX secret_bindings_member ON secret_bindings (member);

CREATE TABLE tool_sources (
	slug         TEXT PRIMARY KEY,
	kind         TEXT    NOT NULL CHECK (kind IN ('custom', 'mcp')),
	display_name TEXT    NOT NULL DEFAULT '',
	config       TEXT    NOT NULL DEFAULT '{}', -- JSON object
	enabled      INTEGER NOT NULL,
	all_members  INTEGER NOT NULL,
	cred_kind    TEXT    NOT NULL DEFAULT '',   -- '', bearer or header
	cred_header  TEXT    NOT NULL DEFAULT '',
	cred_secret  BLOB,                          -- sealed secret; NULL when none
	created_at   INTEGER NOT NULL,
	updated_at   INTEGER NOT NULL
) STRICT;

CREATE TABLE tool_bindings (
	slug   TEXT NOT NULL REFERENCES tool_sources (slug) ON DELETE CASCADE,
	member TEXT NOT NULL REFERENCES members (name) ON DELETE CASCADE,
	PRIMARY KEY (slug, member)
) STRICT, WITHOUT ROWID;

CREATE INDEX tool_bindings_member ON tool_bindings (member);

-- Custom tool definitions (binding set) and the cached tool lists of MCP
-- sources (binding NULL), one row per tool.
CREATE TABLE tools (
	slug         TEXT NOT NULL REFERENCES tool_sources (slug) ON DELETE CASCADE,
	name         TEXT NOT NULL,
	description  TEXT NOT NULL DEFAULT '',
	input_schema TEXT NOT NULL,                -- JSON object
	binding      TEXT,                         -- JSON object; NULL for MCP tools
	PRIMARY KEY (slug, name)
) STRICT, WITHOUT ROWID;
