-- Markers of one objective, for its trace.
CREATE INDEX activity_objective ON activity (objective_id, ts) WHERE objective_id IS NOT NULL;

-- Raw inference uploads, once per SHA-256; never sent to clients.
CREATE TABLE genai_raw (
	sha   TEXT PRIMARY KEY,                   -- hex SHA-256 of bytes
	bytes BLOB NOT NULL
) STRICT;

-- Parsed inference records (OpenTelemetry GenAI message shapes, JSON).
CREATE TABLE genai (
	id                    TEXT    PRIMARY KEY,
	member                TEXT    NOT NULL,
	ts                    INTEGER NOT NULL,   -- capture time, epoch ms
	provider              TEXT    NOT NULL,
	api                   TEXT    NOT NULL,
	model                 TEXT    NOT NULL,
	response_id           TEXT    NOT NULL DEFAULT '',
	input_tokens          INTEGER NOT NULL DEFAULT 0,
	output_tokens         INTEGER NOT NULL DEFAULT 0,
	cache_read_tokens     INTEGER NOT NULL DEFAULT 0,
	cache_creation_tokens INTEGER NOT NULL DEFAULT 0,
	reasoning_tokens      INTEGER NOT NULL DEFAULT 0,
	system_instructions   TEXT    NOT NULL DEFAULT '[]',
	input_messages        TEXT    NOT NULL DEFAULT '[]',
	output_messages       TEXT    NOT NULL DEFAULT '[]',
	raw_sha               TEXT    NOT NULL REFERENCES genai_raw (sha)
) STRICT;

CREATE INDEX genai_member_ts ON genai (member, ts);
CREATE INDEX genai_ts ON genai (ts);
CREATE INDEX genai_response ON genai (member, response_id) WHERE response_id != '';
CREATE INDEX genai_raw_sha ON genai (raw_sha);

-- Pending OTLP correlation state per member (JSON), so acknowledged records
-- survive a crash.
CREATE TABLE otlp_state (
	member     TEXT    PRIMARY KEY,
	state      BLOB    NOT NULL,
	updated_at INTEGER NOT NULL               -- epoch ms
) STRICT;
