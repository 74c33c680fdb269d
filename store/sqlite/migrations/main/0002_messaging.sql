-- Messages are kept when their sender or recipients leave: history outlives
-- membership, so no foreign keys to members here. seq is AUTOINCREMENT so an
-- id is never reused: clients resume streams by the last id they saw.
CREATE TABLE messages (
	seq          INTEGER PRIMARY KEY AUTOINCREMENT,
	sender       TEXT    NOT NULL,
	recipient    TEXT,                        -- DM recipient; NULL otherwise
	thread       TEXT    NOT NULL,            -- chan:general, dm:<a>:<b>, chan:<id>, obj:<id>, ...
	title        TEXT    NOT NULL DEFAULT '',
	body         TEXT    NOT NULL,
	level        TEXT    NOT NULL,
	data         TEXT,                        -- JSON object or NULL
	meta         TEXT,                        -- JSON object or NULL
	attachments  TEXT    NOT NULL DEFAULT '[]', -- JSON array of paths
	created_at   INTEGER NOT NULL,            -- epoch ms, non-decreasing with seq
	all_members  INTEGER NOT NULL DEFAULT 0   -- 1: addressed to every member but the sender
) STRICT;

CREATE INDEX messages_thread ON messages (thread, seq);
-- Broadcasts in id order, for replaying a member's backlog.
CREATE INDEX messages_all ON messages (seq) WHERE all_members = 1;

-- Who each message was addressed to (not for all_members messages), for
-- replay after a reconnect and per-viewer thread reads.
CREATE TABLE message_recipients (
	member TEXT    NOT NULL,
	seq    INTEGER NOT NULL REFERENCES messages (seq) ON DELETE CASCADE,
	PRIMARY KEY (member, seq)
) STRICT, WITHOUT ROWID;

-- No index on seq alone: messages are never deleted, and every index is a
-- page written by each commit.

-- Slugs are unique across live and archived channels, so an archived
-- channel stays addressable by its slug.
CREATE TABLE channels (
	id          TEXT PRIMARY KEY,
	slug        TEXT    NOT NULL UNIQUE,
	created_at  INTEGER NOT NULL,
	created_by  TEXT    NOT NULL,
	archived_at INTEGER
) STRICT;

CREATE TABLE channel_members (
	channel TEXT NOT NULL REFERENCES channels (id) ON DELETE CASCADE,
	member  TEXT NOT NULL REFERENCES members (name) ON DELETE CASCADE,
	role    TEXT NOT NULL CHECK (role IN ('admin', 'member')),
	PRIMARY KEY (channel, member)
) STRICT, WITHOUT ROWID;

CREATE INDEX channel_members_member ON channel_members (member);

CREATE TABLE push_subscriptions (
	id         TEXT PRIMARY KEY,
	member     TEXT    NOT NULL REFERENCES members (name) ON DELETE CASCADE,
	endpoint   TEXT    NOT NULL UNIQUE,
	p256dh     TEXT    NOT NULL,
	auth       TEXT    NOT NULL,
	created_at INTEGER NOT NULL
) STRICT;

CREATE INDEX push_subscriptions_member ON push_subscriptions (member);

-- general always exists; every member is in it, so it has no member rows.
INSERT INTO channels (id, slug, created_at, created_by) VALUES ('general', 'general', CAST(unixepoch('subsec') * 1000 AS INTEGER), '');
