-- The store's facts about itself (store.MetaStore): the id of the team it
-- belongs to and the fingerprint of the KEK its sealed values are sealed
-- under. The broker checks both at boot (docs/DECISIONS.md, "What a boot
-- may assume"); a database from before this migration gets them recorded
-- at its next start.
CREATE TABLE meta (
	key   TEXT PRIMARY KEY,
	value TEXT NOT NULL
) STRICT, WITHOUT ROWID;
