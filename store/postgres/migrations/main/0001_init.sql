-- The main store's schema on PostgreSQL: the tables of store/sqlite's
-- migrations up to 0020, in one step (docs/DECISIONS.md, "PostgreSQL
-- store"). Times are epoch ms in BIGINT (NULL for the zero time), JSON is
-- TEXT as the server wrote it, flags are BOOLEAN, and every TEXT column
-- has the "C" collation: SQLite's byte order, whatever the database's
-- locale, for path ranges and sorted lists.

-- Members mirror the team config file; every other table references them by
-- name so that removing a member from the config removes what hangs off it.
CREATE TABLE members (
	name         TEXT COLLATE "C" PRIMARY KEY,
	role         TEXT COLLATE "C",                        -- JSON {"title","description"}; NULL when the member has no role
	instructions TEXT COLLATE "C" NOT NULL DEFAULT '',
	permissions  TEXT COLLATE "C" NOT NULL DEFAULT '[]',  -- JSON array of strings
	created_at   BIGINT NOT NULL,
	updated_at   BIGINT NOT NULL,
	-- The newest message id when the member was created: a name deleted
	-- and created again sees nothing addressed to the earlier member.
	since_seq    BIGINT NOT NULL DEFAULT 0,
	member_id    TEXT COLLATE "C" NOT NULL DEFAULT ''
);

-- Tokens are kept after a revoke (revoked_at set) so that a hash seeded from
-- the config file is never revived. rowid keeps insertion order, as
-- SQLite's does.
CREATE TABLE tokens (
	rowid        BIGINT GENERATED ALWAYS AS IDENTITY,
	id           TEXT COLLATE "C" PRIMARY KEY,
	member       TEXT COLLATE "C" NOT NULL REFERENCES members (name) ON DELETE CASCADE,
	hash         BYTEA  NOT NULL UNIQUE,     -- SHA-256 of the plaintext
	label        TEXT COLLATE "C" NOT NULL DEFAULT '',
	origin       TEXT COLLATE "C" NOT NULL DEFAULT '',
	created_at   BIGINT NOT NULL,
	created_by   TEXT COLLATE "C" NOT NULL DEFAULT '',
	last_used_at BIGINT,
	expires_at   BIGINT,
	revoked_at   BIGINT
);

CREATE INDEX tokens_member ON tokens (member);

CREATE TABLE sessions (
	hash         BYTEA PRIMARY KEY,            -- SHA-256 of the cookie value
	member       TEXT COLLATE "C" NOT NULL REFERENCES members (name) ON DELETE CASCADE,
	created_at   BIGINT NOT NULL,
	last_seen_at BIGINT NOT NULL,
	expires_at   BIGINT,                       -- NULL: never expires
	id           TEXT COLLATE "C" UNIQUE
);

CREATE INDEX sessions_expires_at ON sessions (expires_at);
CREATE INDEX sessions_member ON sessions (member);

-- Messages are kept when their sender or recipients leave: history outlives
-- membership, so no foreign keys to members here. seq comes from
-- message_seq, bumped under the store's write lock: ids are the commit
-- order and never reused (docs/DECISIONS.md, "PostgreSQL store").
CREATE TABLE messages (
	seq          BIGINT PRIMARY KEY,
	sender       TEXT COLLATE "C" NOT NULL,
	recipient    TEXT COLLATE "C",                        -- DM recipient; NULL otherwise
	thread       TEXT COLLATE "C" NOT NULL,
	title        TEXT COLLATE "C" NOT NULL DEFAULT '',
	body         TEXT COLLATE "C" NOT NULL,
	level        TEXT COLLATE "C" NOT NULL,
	data         TEXT COLLATE "C",                        -- JSON object or NULL
	meta         TEXT COLLATE "C",                        -- JSON object or NULL
	attachments  TEXT COLLATE "C" NOT NULL DEFAULT '[]',  -- JSON array of paths
	created_at   BIGINT  NOT NULL,
	all_members  BOOLEAN NOT NULL DEFAULT false,          -- addressed to every member but the sender
	reply_to     BIGINT,
	hops         BIGINT  NOT NULL DEFAULT 0,
	chain        BIGINT,
	loop_stopped BOOLEAN NOT NULL DEFAULT false
);

CREATE INDEX messages_thread ON messages (thread, seq);
CREATE INDEX messages_all ON messages (seq) WHERE all_members;

CREATE TABLE message_seq (
	one BOOLEAN PRIMARY KEY DEFAULT true CHECK (one),
	seq BIGINT  NOT NULL
);
INSERT INTO message_seq (seq) VALUES (0);

CREATE TABLE message_recipients (
	member TEXT COLLATE "C" NOT NULL,
	seq    BIGINT NOT NULL REFERENCES messages (seq) ON DELETE CASCADE,
	PRIMARY KEY (member, seq)
);

CREATE TABLE channels (
	id          TEXT COLLATE "C" PRIMARY KEY,
	slug        TEXT COLLATE "C" NOT NULL UNIQUE,
	created_at  BIGINT NOT NULL,
	created_by  TEXT COLLATE "C" NOT NULL,
	archived_at BIGINT
);

CREATE TABLE channel_members (
	channel TEXT COLLATE "C" NOT NULL REFERENCES channels (id) ON DELETE CASCADE,
	member  TEXT COLLATE "C" NOT NULL REFERENCES members (name) ON DELETE CASCADE,
	role    TEXT COLLATE "C" NOT NULL CHECK (role IN ('admin', 'member')),
	PRIMARY KEY (channel, member)
);

CREATE INDEX channel_members_member ON channel_members (member);

CREATE TABLE push_subscriptions (
	id         TEXT COLLATE "C" PRIMARY KEY,
	member     TEXT COLLATE "C" NOT NULL REFERENCES members (name) ON DELETE CASCADE,
	endpoint   TEXT COLLATE "C" NOT NULL UNIQUE,
	p256dh     TEXT COLLATE "C" NOT NULL,
	auth       TEXT COLLATE "C" NOT NULL,
	created_at BIGINT NOT NULL
);

CREATE INDEX push_subscriptions_member ON push_subscriptions (member);

-- general always exists; every member is in it, so it has no member rows.
INSERT INTO channels (id, slug, created_at, created_by)
VALUES ('general', 'general', (extract(epoch FROM clock_timestamp()) * 1000)::bigint, '');

CREATE TABLE objectives (
	rowid         BIGINT GENERATED ALWAYS AS IDENTITY,
	id            TEXT COLLATE "C" PRIMARY KEY,
	title         TEXT COLLATE "C" NOT NULL,
	outcome       TEXT COLLATE "C" NOT NULL,
	body          TEXT COLLATE "C" NOT NULL DEFAULT '',
	status        TEXT COLLATE "C" NOT NULL CHECK (status IN ('active', 'blocked', 'done', 'cancelled')),
	assignee      TEXT COLLATE "C" NOT NULL,
	originator    TEXT COLLATE "C" NOT NULL,
	watchers      TEXT COLLATE "C" NOT NULL DEFAULT '[]',
	attachments   TEXT COLLATE "C" NOT NULL DEFAULT '[]',
	created_at    BIGINT NOT NULL,
	updated_at    BIGINT NOT NULL,
	completed_at  BIGINT,
	result        TEXT COLLATE "C",
	block_reason  TEXT COLLATE "C",
	assignee_id   TEXT COLLATE "C" NOT NULL DEFAULT '',
	originator_id TEXT COLLATE "C" NOT NULL DEFAULT '',
	CHECK ((status = 'done') = (completed_at IS NOT NULL))
);

CREATE INDEX objectives_assignee ON objectives (assignee, status);
CREATE INDEX objectives_created ON objectives (created_at);

-- The append-only audit log, written in the transaction of each change.
CREATE TABLE objective_events (
	id           BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
	objective_id TEXT COLLATE "C" NOT NULL REFERENCES objectives (id) ON DELETE CASCADE,
	kind         TEXT COLLATE "C" NOT NULL,
	actor        TEXT COLLATE "C" NOT NULL,
	created_at   BIGINT NOT NULL,
	payload      TEXT COLLATE "C"
);

CREATE INDEX objective_events_objective ON objective_events (objective_id, id);

CREATE FUNCTION objective_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION 'objective events are append-only';
END $$;

CREATE TRIGGER objective_events_no_update BEFORE UPDATE ON objective_events
FOR EACH ROW EXECUTE FUNCTION objective_events_append_only();
CREATE TRIGGER objective_events_no_delete BEFORE DELETE ON objective_events
FOR EACH ROW EXECUTE FUNCTION objective_events_append_only();

-- Virtual filesystem (store/sqlite migration 0004 explains the model).
CREATE TABLE fs_blobs (
	sha  TEXT COLLATE "C" PRIMARY KEY,
	size BIGINT NOT NULL,
	refs BIGINT NOT NULL CHECK (refs >= 0)
);

CREATE INDEX fs_blobs_unreferenced ON fs_blobs (sha) WHERE refs = 0;

CREATE TABLE fs_entries (
	id         BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
	path       TEXT COLLATE "C" NOT NULL UNIQUE,
	parent     TEXT COLLATE "C" NOT NULL,
	owner      TEXT COLLATE "C" NOT NULL,
	kind       TEXT COLLATE "C" NOT NULL CHECK (kind IN ('file', 'dir')),
	size       BIGINT NOT NULL DEFAULT 0,
	mime_type  TEXT COLLATE "C" NOT NULL DEFAULT '',
	blob       TEXT COLLATE "C" REFERENCES fs_blobs (sha),
	created_at BIGINT NOT NULL,
	updated_at BIGINT NOT NULL,
	CHECK ((kind = 'file') = (blob IS NOT NULL))
);

CREATE INDEX fs_entries_parent ON fs_entries (parent, path);
CREATE INDEX fs_entries_blob ON fs_entries (blob) WHERE blob IS NOT NULL;

-- A path's home: its first segment ("/alice/x" -> "alice").
CREATE FUNCTION fs_home(p TEXT) RETURNS TEXT LANGUAGE sql IMMUTABLE AS $$
	SELECT split_part(substr(p, 2), '/', 1) COLLATE "C"
$$;

CREATE TABLE fs_usage (
	home  TEXT COLLATE "C" PRIMARY KEY,
	bytes BIGINT NOT NULL
);

-- Reference counts and per-home usage, kept in the statement's
-- transaction like SQLite's triggers. The blob row is created or counted
-- up BEFORE the entry row is written, so the foreign key holds; the old
-- blob is counted down AFTER.
CREATE FUNCTION fs_entries_ref() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF NEW.blob IS NOT NULL AND (TG_OP = 'INSERT' OR NEW.blob IS DISTINCT FROM OLD.blob) THEN
		INSERT INTO fs_blobs (sha, size, refs) VALUES (NEW.blob, NEW.size, 1)
		ON CONFLICT (sha) DO UPDATE SET refs = fs_blobs.refs + 1;
	END IF;
	RETURN NEW;
END $$;

CREATE TRIGGER fs_entries_ref_insert BEFORE INSERT ON fs_entries
FOR EACH ROW EXECUTE FUNCTION fs_entries_ref();
CREATE TRIGGER fs_entries_ref_update BEFORE UPDATE OF blob ON fs_entries
FOR EACH ROW EXECUTE FUNCTION fs_entries_ref();

CREATE FUNCTION fs_entries_after() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF TG_OP IN ('UPDATE', 'DELETE') AND OLD.blob IS NOT NULL
		AND (TG_OP = 'DELETE' OR NEW.blob IS DISTINCT FROM OLD.blob) THEN
		UPDATE fs_blobs SET refs = refs - 1 WHERE sha = OLD.blob;
	END IF;
	IF TG_OP IN ('UPDATE', 'DELETE') AND OLD.kind = 'file' THEN
		UPDATE fs_usage SET bytes = bytes - OLD.size WHERE home = fs_home(OLD.path);
	END IF;
	IF TG_OP IN ('INSERT', 'UPDATE') AND NEW.kind = 'file' THEN
		INSERT INTO fs_usage (home, bytes) VALUES (fs_home(NEW.path), NEW.size)
		ON CONFLICT (home) DO UPDATE SET bytes = fs_usage.bytes + excluded.bytes;
	END IF;
	RETURN NULL;
END $$;

CREATE TRIGGER fs_entries_after AFTER INSERT OR UPDATE OR DELETE ON fs_entries
FOR EACH ROW EXECUTE FUNCTION fs_entries_after();

CREATE TABLE fs_grants (
	entry_id BIGINT NOT NULL REFERENCES fs_entries (id) ON DELETE CASCADE,
	grantee  TEXT COLLATE "C" NOT NULL,
	PRIMARY KEY (entry_id, grantee)
);

CREATE INDEX fs_grants_grantee ON fs_grants (grantee);

-- A member's grants and files go with the member, so a re-created name
-- inherits none of them.
CREATE FUNCTION members_gone() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	DELETE FROM fs_grants WHERE grantee = OLD.name;
	DELETE FROM fs_entries WHERE path > '/' || OLD.name || '/' AND path < '/' || OLD.name || '0';
	RETURN NULL;
END $$;

CREATE TRIGGER members_gone AFTER DELETE ON members
FOR EACH ROW EXECUTE FUNCTION members_gone();

CREATE TABLE secrets (
	slug        TEXT COLLATE "C" PRIMARY KEY,
	env_name    TEXT COLLATE "C" NOT NULL UNIQUE,
	description TEXT COLLATE "C" NOT NULL DEFAULT '',
	enabled     BOOLEAN NOT NULL,
	all_members BOOLEAN NOT NULL,
	value       BYTEA,
	created_at  BIGINT NOT NULL,
	updated_at  BIGINT NOT NULL
);

CREATE TABLE secret_bindings (
	slug   TEXT COLLATE "C" NOT NULL REFERENCES secrets (slug) ON DELETE CASCADE,
	member TEXT COLLATE "C" NOT NULL REFERENCES members (name) ON DELETE CASCADE,
	PRIMARY KEY (slug, member)
);

CREATE INDEX secret_bindings_member ON secret_bindings (member);

CREATE TABLE tool_sources (
	slug         TEXT COLLATE "C" PRIMARY KEY,
	kind         TEXT COLLATE "C" NOT NULL CHECK (kind IN ('custom', 'mcp')),
	display_name TEXT COLLATE "C" NOT NULL DEFAULT '',
	config       TEXT COLLATE "C" NOT NULL DEFAULT '{}',
	enabled      BOOLEAN NOT NULL,
	all_members  BOOLEAN NOT NULL,
	cred_kind    TEXT COLLATE "C" NOT NULL DEFAULT '',
	cred_header  TEXT COLLATE "C" NOT NULL DEFAULT '',
	cred_secret  BYTEA,
	created_at   BIGINT NOT NULL,
	updated_at   BIGINT NOT NULL
);

CREATE TABLE tool_bindings (
	slug   TEXT COLLATE "C" NOT NULL REFERENCES tool_sources (slug) ON DELETE CASCADE,
	member TEXT COLLATE "C" NOT NULL REFERENCES members (name) ON DELETE CASCADE,
	PRIMARY KEY (slug, member)
);

CREATE INDEX tool_bindings_member ON tool_bindings (member);

CREATE TABLE tools (
	slug         TEXT COLLATE "C" NOT NULL REFERENCES tool_sources (slug) ON DELETE CASCADE,
	name         TEXT COLLATE "C" NOT NULL,
	description  TEXT COLLATE "C" NOT NULL DEFAULT '',
	input_schema TEXT COLLATE "C" NOT NULL,
	binding      TEXT COLLATE "C",
	PRIMARY KEY (slug, name)
);

CREATE TABLE enrollments (
	rowid        BIGINT GENERATED ALWAYS AS IDENTITY,
	id           TEXT COLLATE "C" PRIMARY KEY,
	device_hash  BYTEA  NOT NULL UNIQUE,
	user_code    TEXT COLLATE "C" NOT NULL UNIQUE,
	label_hint   TEXT COLLATE "C" NOT NULL DEFAULT '',
	source_ip    TEXT COLLATE "C" NOT NULL DEFAULT '',
	user_agent   TEXT COLLATE "C" NOT NULL DEFAULT '',
	status       TEXT COLLATE "C" NOT NULL CHECK (status IN ('pending', 'approved', 'rejected')),
	reason       TEXT COLLATE "C" NOT NULL DEFAULT '',
	created_at   BIGINT NOT NULL,
	expires_at   BIGINT NOT NULL,
	interval_ms  BIGINT NOT NULL,
	last_poll_at BIGINT,
	member       TEXT COLLATE "C" NOT NULL DEFAULT '',
	token_id     TEXT COLLATE "C" NOT NULL DEFAULT '',
	sealed_token TEXT COLLATE "C" NOT NULL DEFAULT ''
);

CREATE INDEX enrollments_expires_at ON enrollments (expires_at);

CREATE TABLE pairing_codes (
	hash       BYTEA PRIMARY KEY CHECK (length(hash) = 32),
	issuer     TEXT COLLATE "C" NOT NULL,
	audience   TEXT COLLATE "C" NOT NULL,
	jwks_url   TEXT COLLATE "C" NOT NULL,
	created_by TEXT COLLATE "C" NOT NULL,
	created_at BIGINT NOT NULL,
	expires_at BIGINT NOT NULL
);

CREATE INDEX pairing_codes_expires ON pairing_codes (expires_at);

CREATE TABLE hook_profiles (
	slug        TEXT COLLATE "C" PRIMARY KEY,
	description TEXT COLLATE "C" NOT NULL DEFAULT '',
	auth_kind   TEXT COLLATE "C" NOT NULL,
	auth_header TEXT COLLATE "C" NOT NULL DEFAULT '',
	auth_prefix TEXT COLLATE "C" NOT NULL DEFAULT '',
	secret      BYTEA,
	created_at  BIGINT NOT NULL,
	updated_at  BIGINT NOT NULL
);

CREATE TABLE hook_endpoints (
	slug          TEXT COLLATE "C" PRIMARY KEY,
	display_name  TEXT COLLATE "C" NOT NULL DEFAULT '',
	targets       TEXT COLLATE "C" NOT NULL DEFAULT '[]',
	auth_kind     TEXT COLLATE "C" NOT NULL DEFAULT '',
	auth_header   TEXT COLLATE "C" NOT NULL DEFAULT '',
	auth_prefix   TEXT COLLATE "C" NOT NULL DEFAULT '',
	auth_profile  TEXT COLLATE "C" REFERENCES hook_profiles (slug) ON DELETE RESTRICT,
	filters       TEXT COLLATE "C" NOT NULL DEFAULT '[]',
	template      TEXT COLLATE "C" NOT NULL DEFAULT '',
	policy        TEXT COLLATE "C" NOT NULL DEFAULT '{}',
	dedupe_header TEXT COLLATE "C" NOT NULL DEFAULT '',
	enabled       BOOLEAN NOT NULL,
	level         TEXT COLLATE "C" NOT NULL,
	secret        BYTEA,
	created_at    BIGINT NOT NULL,
	updated_at    BIGINT NOT NULL
);

CREATE INDEX hook_endpoints_profile ON hook_endpoints (auth_profile);

CREATE TABLE hook_deliveries (
	rowid       BIGINT GENERATED ALWAYS AS IDENTITY,
	id          TEXT COLLATE "C" PRIMARY KEY,
	endpoint    TEXT COLLATE "C" NOT NULL REFERENCES hook_endpoints (slug) ON DELETE CASCADE,
	status      TEXT COLLATE "C" NOT NULL,
	reason      TEXT COLLATE "C" NOT NULL DEFAULT '',
	dedupe_key  TEXT COLLATE "C" NOT NULL DEFAULT '',
	message_ids TEXT COLLATE "C" NOT NULL DEFAULT '[]',
	received_at BIGINT NOT NULL,
	size        BIGINT NOT NULL,
	body        BYTEA  NOT NULL,
	if_offline  TEXT COLLATE "C" NOT NULL DEFAULT '',
	if_busy     TEXT COLLATE "C" NOT NULL DEFAULT '',
	level       TEXT COLLATE "C" NOT NULL DEFAULT ''
);

CREATE INDEX hook_deliveries_endpoint ON hook_deliveries (endpoint, received_at);
CREATE INDEX hook_deliveries_dedupe ON hook_deliveries (endpoint, dedupe_key, received_at) WHERE dedupe_key <> '';
CREATE INDEX hook_deliveries_received ON hook_deliveries (received_at);

CREATE TABLE hook_pending (
	rowid       BIGINT GENERATED ALWAYS AS IDENTITY,
	delivery    TEXT COLLATE "C" NOT NULL REFERENCES hook_deliveries (id) ON DELETE CASCADE,
	endpoint    TEXT COLLATE "C" NOT NULL REFERENCES hook_endpoints (slug) ON DELETE CASCADE,
	member      TEXT COLLATE "C" NOT NULL DEFAULT '',
	kind        TEXT COLLATE "C" NOT NULL CHECK (kind IN ('queue', 'wait', 'debounce')),
	received_at BIGINT NOT NULL,
	due_at      BIGINT NOT NULL,
	level       TEXT COLLATE "C" NOT NULL,
	items       TEXT COLLATE "C" NOT NULL,
	PRIMARY KEY (delivery, member, kind)
);

CREATE INDEX hook_pending_member ON hook_pending (kind, member, endpoint, received_at);
CREATE INDEX hook_pending_endpoint ON hook_pending (endpoint, kind, received_at);
CREATE INDEX hook_pending_due ON hook_pending (due_at);

CREATE TABLE deliveries (
	member            TEXT COLLATE "C" PRIMARY KEY REFERENCES members (name) ON DELETE CASCADE,
	position          BIGINT,
	turn_active       BOOLEAN NOT NULL DEFAULT false,
	turn_seq          BIGINT,
	turn_started_at   BIGINT,
	first_attached_at BIGINT NOT NULL,
	updated_at        BIGINT NOT NULL
);

CREATE TABLE meta (
	key   TEXT COLLATE "C" PRIMARY KEY,
	value TEXT COLLATE "C" NOT NULL
);

CREATE TABLE former_members (
	id         TEXT COLLATE "C" PRIMARY KEY,
	name       TEXT COLLATE "C" NOT NULL,
	deleted_at BIGINT NOT NULL,
	deleted_by TEXT COLLATE "C" NOT NULL
);

CREATE TABLE loop_stops (
	chain      BIGINT PRIMARY KEY,
	message    BIGINT NOT NULL,
	created_at BIGINT NOT NULL
);

CREATE TABLE approvals (
	rowid        BIGINT GENERATED ALWAYS AS IDENTITY,
	id           TEXT COLLATE "C" PRIMARY KEY,
	member       TEXT COLLATE "C" NOT NULL REFERENCES members (name) ON DELETE CASCADE,
	tool         TEXT COLLATE "C" NOT NULL,
	input        BYTEA  NOT NULL,
	objective    TEXT COLLATE "C",
	status       TEXT COLLATE "C" NOT NULL CHECK (status IN ('pending', 'allowed', 'denied', 'expired')),
	requested_at BIGINT NOT NULL,
	expires_at   BIGINT NOT NULL,
	decided_at   BIGINT,
	decided_by   TEXT COLLATE "C",
	reason       TEXT COLLATE "C"
);

CREATE INDEX approvals_pending ON approvals (status, expires_at);
CREATE INDEX approvals_member ON approvals (member, requested_at);
