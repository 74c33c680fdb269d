-- A member's since_seq is the newest message id when the member was
-- created: a name deleted and created again sees nothing addressed to the
-- earlier member, compared by commit order rather than by a clock that may
-- step back. Existing members get it from their creation time, once.
ALTER TABLE members ADD COLUMN since_seq INTEGER NOT NULL DEFAULT 0;
UPDATE members SET since_seq = (
	SELECT COALESCE(MAX(seq), 0) FROM messages WHERE messages.created_at < members.created_at
);
