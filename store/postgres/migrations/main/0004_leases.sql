-- Leases (docs/DECISIONS.md, "Hook schedulers on several brokers"): a
-- named job that one broker runs at a time, its holder, the epoch that
-- changes with each new holder (writes of the job check it) and when it
-- lapses unless renewed (epoch ms).
CREATE TABLE leases (
	name       TEXT COLLATE "C" PRIMARY KEY,
	owner      TEXT COLLATE "C" NOT NULL,
	epoch      BIGINT NOT NULL,
	expires_at BIGINT NOT NULL
);
