-- GenAI records by content-addressed parts (store/sqlite/genaiparts.go):
-- the raw upload and each message array is a tree of parts, each stored
-- once per SHA-256 of its bytes, so what a session's calls repeat (tool
-- definitions, system prompts, the messages so far) is stored once
-- (docs/DECISIONS.md, "GenAI records stored by parts").
CREATE TABLE genai_part (
	id       INTEGER PRIMARY KEY,             -- children are always older
	sha      BLOB    NOT NULL UNIQUE,         -- SHA-256 of the part's bytes
	node     BLOB    NOT NULL,                -- its bytes, its children left out
	children TEXT    NOT NULL DEFAULT '[]'    -- JSON array of child part ids
) STRICT;

-- The parts of each record; NULL in records stored before them, which keep
-- their message arrays in their columns and their raw upload in genai_raw.
-- A record stored by parts leaves its array columns empty and its
-- genai_raw row (which raw_sha still references) without bytes. Columns
-- are added, not the table rebuilt, so columns other migrations add to
-- genai stay.
ALTER TABLE genai ADD COLUMN raw_part INTEGER;
ALTER TABLE genai ADD COLUMN system_part INTEGER;
ALTER TABLE genai ADD COLUMN input_part INTEGER;
ALTER TABLE genai ADD COLUMN output_part INTEGER;
