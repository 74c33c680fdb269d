-- Reply chains (docs/RUNNER.md, Loop guard): the broker stamps each message
-- with the message whose turn its sender was in (reply_to), the
-- agent-to-agent hops since a message sent outside a turn (hops), the
-- chain's first message (chain; NULL: the message starts one or was sent
-- outside a turn) and whether it went past the hop bound (loop_stopped).
-- Numbered clear of the migrations other branches of issue 23 add.
ALTER TABLE messages ADD COLUMN reply_to INTEGER;
ALTER TABLE messages ADD COLUMN hops INTEGER NOT NULL DEFAULT 0;
ALTER TABLE messages ADD COLUMN chain INTEGER;
ALTER TABLE messages ADD COLUMN loop_stopped INTEGER NOT NULL DEFAULT 0;

-- A chain's first stop: its notice goes out once per chain, and the key
-- says whether it already went.
CREATE TABLE loop_stops (
	chain      INTEGER PRIMARY KEY,   -- the chain's first message
	message    INTEGER NOT NULL,      -- its first stopped message
	created_at INTEGER NOT NULL       -- epoch ms
) STRICT;
