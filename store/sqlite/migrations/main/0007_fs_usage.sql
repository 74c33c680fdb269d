-- The bytes of the files in each home, kept by triggers in the transaction
-- of every change, so a quota check reads one row instead of summing a
-- whole home inside the commit every message shares. A home is the first
-- segment of a path ("/alice/x" -> "alice"); entries are at least two
-- segments deep.
CREATE TABLE fs_usage (
	home  TEXT PRIMARY KEY,
	bytes INTEGER NOT NULL
) STRICT;

INSERT INTO fs_usage (home, bytes)
SELECT substr(path, 2, instr(substr(path, 2), '/') - 1), SUM(size)
FROM fs_entries WHERE kind = 'file' GROUP BY 1;

CREATE TRIGGER fs_usage_insert AFTER INSERT ON fs_entries WHEN NEW.kind = 'file'
BEGIN
	INSERT INTO fs_usage (home, bytes)
	VALUES (substr(NEW.path, 2, instr(substr(NEW.path, 2), '/') - 1), NEW.size)
	ON CONFLICT (home) DO UPDATE SET bytes = bytes + excluded.bytes;
END;

CREATE TRIGGER fs_usage_delete AFTER DELETE ON fs_entries WHEN OLD.kind = 'file'
BEGIN
	UPDATE fs_usage SET bytes = bytes - OLD.size
	WHERE home = substr(OLD.path, 2, instr(substr(OLD.path, 2), '/') - 1);
END;

CREATE TRIGGER fs_usage_update AFTER UPDATE OF path, size ON fs_entries WHEN OLD.kind = 'file'
BEGIN
	UPDATE fs_usage SET bytes = bytes - OLD.size
	WHERE home = substr(OLD.path, 2, instr(substr(OLD.path, 2), '/') - 1);
	INSERT INTO fs_usage (home, bytes)
	VALUES (substr(NEW.path, 2, instr(substr(NEW.path, 2), '/') - 1), NEW.size)
	ON CONFLICT (home) DO UPDATE SET bytes = bytes + excluded.bytes;
END;
