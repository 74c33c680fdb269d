-- Leases (docs/DECISIONS.md, "Hook schedulers on several brokers"): a
-- named job that one broker runs at a time, its holder, the epoch that
-- changes with each new holder (writes of the job check it) and when it
-- lapses unless renewed. A broker alone takes its leases at once.
CREATE TABLE leases (
	name       TEXT    PRIMARY KEY,
	owner      TEXT    NOT NULL,
	epoch      INTEGER NOT NULL,
	expires_at INTEGER NOT NULL              -- epoch ms
) STRICT;
