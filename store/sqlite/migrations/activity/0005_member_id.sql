-- Which member of its name a row belongs to: the member's id
-- (docs/DECISIONS.md, "A deleted member's data stays its own"), so a name
-- deleted and created again does not read the earlier member's activity
-- or inference records. Rows from before this migration have none until
-- the broker's next start gives them one (store.ActivityStore
-- AdoptMemberRows); the partial indexes find them.
ALTER TABLE activity ADD COLUMN member_uid TEXT;
ALTER TABLE genai ADD COLUMN member_uid TEXT;
CREATE INDEX activity_unowned ON activity (member) WHERE member_uid IS NULL;
CREATE INDEX genai_unowned ON genai (member) WHERE member_uid IS NULL;
