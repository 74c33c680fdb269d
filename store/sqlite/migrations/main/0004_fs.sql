-- Virtual filesystem. Content lives on disk, content-addressed by SHA-256
-- (server/vfs); these tables hold the tree, the blob reference counts and the
-- read grants.

-- One row per blob that at least one file entry references. refs is kept by
-- the triggers below; a row whose refs reach 0 is deleted by the store
-- method that dropped the last reference, which hands its sha to the caller
-- to purge from disk.
CREATE TABLE fs_blobs (
	sha  TEXT    PRIMARY KEY,                 -- hex SHA-256 of the content
	size INTEGER NOT NULL,
	refs INTEGER NOT NULL CHECK (refs >= 0)
) STRICT, WITHOUT ROWID;

-- Rows whose last reference just went, found without a table scan.
CREATE INDEX fs_blobs_unreferenced ON fs_blobs (sha) WHERE refs = 0;

-- Homes ("/<member>") and the root have no row. owner is not a foreign key:
-- removing a member's files also purges blobs on disk, which only the
-- service can do.
CREATE TABLE fs_entries (
	id         INTEGER PRIMARY KEY AUTOINCREMENT, -- never reused (grants name it); stays across moves
	path       TEXT    NOT NULL UNIQUE,       -- canonical absolute virtual path
	parent     TEXT    NOT NULL,              -- path of the parent directory or home
	owner      TEXT    NOT NULL,
	kind       TEXT    NOT NULL CHECK (kind IN ('file', 'dir')),
	size       INTEGER NOT NULL DEFAULT 0,
	mime_type  TEXT    NOT NULL DEFAULT '',
	blob       TEXT    REFERENCES fs_blobs (sha),
	created_at INTEGER NOT NULL,              -- epoch ms
	updated_at INTEGER NOT NULL,              -- epoch ms
	CHECK ((kind = 'file') = (blob IS NOT NULL))
) STRICT;

CREATE INDEX fs_entries_parent ON fs_entries (parent, path);
-- For BlobReferenced and for the foreign key check when a blob row goes.
CREATE INDEX fs_entries_blob ON fs_entries (blob) WHERE blob IS NOT NULL;

-- Reference counting. The blob row is created or counted up BEFORE the
-- entry row is written, so the foreign key holds; the old blob is counted
-- down AFTER.
CREATE TRIGGER fs_entries_ref_insert BEFORE INSERT ON fs_entries
WHEN NEW.blob IS NOT NULL
BEGIN
	INSERT INTO fs_blobs (sha, size, refs) VALUES (NEW.blob, NEW.size, 1)
	ON CONFLICT (sha) DO UPDATE SET refs = refs + 1;
END;

CREATE TRIGGER fs_entries_ref_update BEFORE UPDATE OF blob ON fs_entries
WHEN NEW.blob IS NOT NULL AND NEW.blob IS NOT OLD.blob
BEGIN
	INSERT INTO fs_blobs (sha, size, refs) VALUES (NEW.blob, NEW.size, 1)
	ON CONFLICT (sha) DO UPDATE SET refs = refs + 1;
END;

CREATE TRIGGER fs_entries_unref_update AFTER UPDATE OF blob ON fs_entries
WHEN OLD.blob IS NOT NULL AND NEW.blob IS NOT OLD.blob
BEGIN
	UPDATE fs_blobs SET refs = refs - 1 WHERE sha = OLD.blob;
END;

CREATE TRIGGER fs_entries_unref_delete AFTER DELETE ON fs_entries
WHEN OLD.blob IS NOT NULL
BEGIN
	UPDATE fs_blobs SET refs = refs - 1 WHERE sha = OLD.blob;
END;

-- Read grants from message and objective attachments. grantee is a member
-- name or '*' (every member), so it cannot be a foreign key; the trigger
-- below drops a member's grants with the member, so a re-created name does
-- not inherit them.
CREATE TABLE fs_grants (
	entry_id INTEGER NOT NULL REFERENCES fs_entries (id) ON DELETE CASCADE,
	grantee  TEXT    NOT NULL,
	PRIMARY KEY (entry_id, grantee)
) STRICT, WITHOUT ROWID;

CREATE INDEX fs_grants_grantee ON fs_grants (grantee);

CREATE TRIGGER fs_grants_member_gone AFTER DELETE ON members
BEGIN
	DELETE FROM fs_grants WHERE grantee = OLD.name;
END;

-- A member's files go with the member, so a re-created name inherits none of
-- them. The blobs they leave unreferenced stay on disk until the sweep at
-- the next boot (server/vfs Sweep) removes them.
CREATE TRIGGER fs_entries_member_gone AFTER DELETE ON members
BEGIN
	DELETE FROM fs_entries WHERE path > '/' || OLD.name || '/' AND path < '/' || OLD.name || '0';
END;
