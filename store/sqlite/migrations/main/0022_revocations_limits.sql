-- What brokers sharing one store must agree on (docs/DECISIONS.md,
-- "Revocation and login limits across brokers"). Numbered 22 to stay clear
-- of the migrations other branches add.

-- The revocations log: each revoke that ends live streams, written in the
-- revoke's transaction, fanned out to every broker by id. AUTOINCREMENT so
-- an id is never reused after a prune.
CREATE TABLE revocations (
	id     INTEGER PRIMARY KEY AUTOINCREMENT,
	member TEXT    NOT NULL,
	what   TEXT    NOT NULL,
	at     INTEGER NOT NULL              -- epoch ms
) STRICT;
CREATE INDEX revocations_at ON revocations (at);

-- One row per counted attempt of a limit that guards a secret (failed
-- logins, enrollment code mints): the limit counts the key's rows in its
-- sliding window.
CREATE TABLE limit_hits (
	id  INTEGER PRIMARY KEY AUTOINCREMENT,
	key TEXT    NOT NULL,
	at  INTEGER NOT NULL                 -- epoch ms
) STRICT;
CREATE INDEX limit_hits_key ON limit_hits (key, at);
CREATE INDEX limit_hits_at ON limit_hits (at);

-- The last TOTP time step accepted per member: a code is good once.
CREATE TABLE totp_steps (
	member TEXT    PRIMARY KEY,
	step   INTEGER NOT NULL
) STRICT;
