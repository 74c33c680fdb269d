-- Approvals (docs/APPROVALS.md): a member's request that a person decide
-- whether it may use a tool. A pending approval outlives a broker restart;
-- a decision is written once (pending -> allowed, denied or expired).
-- Numbered 20 to stay clear of the migrations other branches add.
CREATE TABLE approvals (
	id           TEXT    PRIMARY KEY,
	member       TEXT    NOT NULL REFERENCES members (name) ON DELETE CASCADE,
	tool         TEXT    NOT NULL,
	input        BLOB    NOT NULL,             -- JSON, redacted by the runner
	objective    TEXT,                         -- the objective the member works on; NULL when none
	status       TEXT    NOT NULL CHECK (status IN ('pending', 'allowed', 'denied', 'expired')),
	requested_at INTEGER NOT NULL,             -- epoch ms
	expires_at   INTEGER NOT NULL,             -- epoch ms
	decided_at   INTEGER,                      -- epoch ms; NULL while pending
	decided_by   TEXT,                         -- the decider's name; NULL while pending and on expiry
	reason       TEXT                          -- NULL when none was given
) STRICT;

-- The expiry timer and the pending list read pending approvals by expiry.
CREATE INDEX approvals_pending ON approvals (status, expires_at);
-- A member's own requests.
CREATE INDEX approvals_member ON approvals (member, requested_at);
