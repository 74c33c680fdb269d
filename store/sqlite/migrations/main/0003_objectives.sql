-- Objectives outlive their members' membership (the audit log is history),
-- so names are plain text here. Watchers and attachments are small JSON
-- arrays read and written with the objective.
CREATE TABLE objectives (
	id           TEXT PRIMARY KEY,
	title        TEXT    NOT NULL,
	outcome      TEXT    NOT NULL,
	body         TEXT    NOT NULL DEFAULT '',
	status       TEXT    NOT NULL CHECK (status IN ('active', 'blocked', 'done', 'cancelled')),
	assignee     TEXT    NOT NULL,
	originator   TEXT    NOT NULL,
	watchers     TEXT    NOT NULL DEFAULT '[]', -- JSON array of names
	attachments  TEXT    NOT NULL DEFAULT '[]', -- JSON array of {path,name,size,mimeType,entryId}
	created_at   INTEGER NOT NULL,
	updated_at   INTEGER NOT NULL,
	completed_at INTEGER,                       -- set iff status = 'done'
	result       TEXT,
	block_reason TEXT,
	CHECK ((status = 'done') = (completed_at IS NOT NULL))
) STRICT;

CREATE INDEX objectives_assignee ON objectives (assignee, status);
CREATE INDEX objectives_created ON objectives (created_at);

-- The append-only audit log, written in the transaction of each change.
CREATE TABLE objective_events (
	id           INTEGER PRIMARY KEY AUTOINCREMENT,
	objective_id TEXT    NOT NULL REFERENCES objectives (id) ON DELETE CASCADE,
	kind         TEXT    NOT NULL,
	actor        TEXT    NOT NULL,
	created_at   INTEGER NOT NULL,
	payload      TEXT                           -- JSON object or NULL
) STRICT;

CREATE INDEX objective_events_objective ON objective_events (objective_id, id);

-- The log is append-only: the database refuses edits, not just the code.
CREATE TRIGGER objective_events_no_update BEFORE UPDATE ON objective_events
BEGIN
	SELECT RAISE(ABORT, 'objective events are append-only');
END;

-- Objectives are never deleted, so neither are their events.
CREATE TRIGGER objective_events_no_delete BEFORE DELETE ON objective_events
BEGIN
	SELECT RAISE(ABORT, 'objective events are append-only');
END;
