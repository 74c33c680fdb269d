-- Sessions get an id of their own, so a member (or a manager) can list and
-- end them without ever seeing the cookie or its hash. Existing sessions
-- get a random id.
ALTER TABLE sessions ADD COLUMN id TEXT;
UPDATE sessions SET id = lower(hex(randomblob(16))) WHERE id IS NULL;
CREATE UNIQUE INDEX sessions_id ON sessions (id);
