-- Paths as long as the API allows (4096 bytes) in every index: a btree
-- entry is limited to about 2.7 KB, so no btree holds a whole path.
-- Equality and uniqueness go through hash indexes, which keep only a hash
-- of the value; order and ranges through a btree on the path's first
-- 600 characters (at most 2400 bytes), fs_key, which sorts as the path
-- does: fs_key(a) < fs_key(b) implies a < b, so a query adds the fs_key
-- bounds of its path bounds and orders by (fs_key(path), path).
CREATE FUNCTION fs_key(p TEXT) RETURNS TEXT LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
	SELECT left(p, 600) COLLATE "C"
$$;

ALTER TABLE fs_entries DROP CONSTRAINT fs_entries_path_key;
ALTER TABLE fs_entries ADD CONSTRAINT fs_entries_path_key EXCLUDE USING hash (path WITH =);
CREATE INDEX fs_entries_path_order ON fs_entries (fs_key(path));
DROP INDEX fs_entries_parent;
CREATE INDEX fs_entries_parent ON fs_entries USING hash (parent);
