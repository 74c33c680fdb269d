-- GenAI records by content-addressed parts (store/sqlite/genaiparts.go):
-- the raw upload and each message array is a tree of parts, each stored
-- once per SHA-256 of its bytes, so what a session's calls repeat (tool
-- definitions, system prompts, the messages so far) is stored once.
CREATE TABLE genai_part (
	id       INTEGER PRIMARY KEY,             -- children are always older
	sha      BLOB    NOT NULL UNIQUE,         -- SHA-256 of the part's bytes
	node     BLOB    NOT NULL,                -- its bytes, its children left out
	children TEXT    NOT NULL DEFAULT '[]'    -- JSON array of child part ids
) STRICT;

-- genai again, without the foreign key from raw_sha to genai_raw (records
-- stored from now on keep their raw upload as a part) and with the parts
-- of each record. Records stored before keep their columns and raw row.
CREATE TABLE genai_new (
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
	system_instructions   TEXT    NOT NULL DEFAULT '[]', -- records without parts
	input_messages        TEXT    NOT NULL DEFAULT '[]',
	output_messages       TEXT    NOT NULL DEFAULT '[]',
	raw_sha               TEXT    NOT NULL,   -- hex SHA-256 of the raw upload
	-- The parts (genai_part ids); NULL in records stored before them.
	raw_part              INTEGER,
	system_part           INTEGER,
	input_part            INTEGER,
	output_part           INTEGER
) STRICT;

INSERT INTO genai_new (id, member, ts, provider, api, model, response_id,
	input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens, reasoning_tokens,
	system_instructions, input_messages, output_messages, raw_sha)
SELECT id, member, ts, provider, api, model, response_id,
	input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens, reasoning_tokens,
	system_instructions, input_messages, output_messages, raw_sha FROM genai;
DROP TABLE genai;
ALTER TABLE genai_new RENAME TO genai;

CREATE INDEX genai_member_ts ON genai (member, ts);
CREATE INDEX genai_ts ON genai (ts);
CREATE INDEX genai_response ON genai (member, response_id) WHERE response_id != '';
CREATE INDEX genai_raw_sha ON genai (raw_sha);
