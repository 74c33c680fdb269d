-- Members deleted, by the id that named them apart from any later member of
-- the same name (docs/DECISIONS.md, "A deleted member's data stays its
-- own"): activity and objectives remember the id, and readers are shown
-- whose it was and when it was deleted. Recorded in the transaction that
-- deletes the member.
CREATE TABLE former_members (
	id         TEXT    PRIMARY KEY,
	name       TEXT    NOT NULL,
	deleted_at INTEGER NOT NULL,              -- epoch ms
	deleted_by TEXT    NOT NULL
) STRICT, WITHOUT ROWID;

-- The ids of an objective's assignee and originator, so a name deleted and
-- created again does not take over an earlier member's objectives ('':
-- from before ids, until a start adopts them).
ALTER TABLE objectives ADD COLUMN assignee_id TEXT NOT NULL DEFAULT '';
ALTER TABLE objectives ADD COLUMN originator_id TEXT NOT NULL DEFAULT '';

-- The mirror keeps each member's id too, so a config that lost a member's
-- id (rewritten by hand or by a tool) gets it back at the next start
-- instead of a new one: the member keeps reading its own activity and
-- holding its own objectives ('': from before ids, until a start writes it).
ALTER TABLE members ADD COLUMN member_id TEXT NOT NULL DEFAULT '';
