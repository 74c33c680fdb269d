-- AUTOINCREMENT so that ids are never reused after a prune: clients resume
-- streams by the last id they saw.
CREATE TABLE activity (
	id           INTEGER PRIMARY KEY AUTOINCREMENT,
	member       TEXT    NOT NULL,
	kind         TEXT    NOT NULL,
	ts           INTEGER NOT NULL,            -- epoch ms
	objective_id TEXT,                        -- NULL when none
	data         TEXT    NOT NULL             -- kind-specific JSON object
) STRICT;

CREATE INDEX activity_member_ts ON activity (member, ts, id);
CREATE INDEX activity_ts ON activity (ts);
