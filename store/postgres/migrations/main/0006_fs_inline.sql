-- Small files' content kept in the database (store.FsInlineMax, 64 KiB):
-- written in the transaction that writes the entry, so a small file costs
-- that commit's one fsync instead of a blob file's, its directory's and
-- the commit's. A blob without a row here is on disk (server/vfs), as
-- every blob written before this migration stays. The row goes with its
-- blob row, when the last entry referencing it does.
CREATE TABLE fs_inline (
	sha  TEXT COLLATE "C" PRIMARY KEY REFERENCES fs_blobs (sha) ON DELETE CASCADE,
	data BYTEA NOT NULL
);
