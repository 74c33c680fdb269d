-- A member's delivery state (docs/RUNNER.md, Delivery contract): the
-- position its runner acknowledged (the last message whose turn ended or
-- that was skipped; NULL until the first acknowledgement) and the turn in
-- progress. A row exists once the member's runner attached: the loop guard
-- tells agents from people by it. It goes with its member.
CREATE TABLE deliveries (
	member            TEXT PRIMARY KEY REFERENCES members (name) ON DELETE CASCADE,
	position          INTEGER,                      -- message seq; never moves backwards
	turn_active       INTEGER NOT NULL DEFAULT 0,   -- 1: a turn is in progress
	turn_seq          INTEGER,                      -- the turn's message; NULL: no message (the re-brief)
	turn_started_at   INTEGER,                      -- epoch ms; NULL without a turn
	first_attached_at INTEGER NOT NULL,             -- epoch ms
	updated_at        INTEGER NOT NULL              -- epoch ms
) STRICT, WITHOUT ROWID;
