-- Inbound hook deliveries the policy holds (docs/HOOKS.md, States): a
-- copy queued for an offline member (kind 'queue', due when queueTtlMs
-- from the receipt runs out), a copy held while the member is working
-- (kind 'wait', forced out maxWaitMs after the receipt), or a delivery in
-- an endpoint's debounce buffer (kind 'debounce', member '', due at the
-- window's end). A row belongs to one receipt, whose status is 'pending'
-- while it has rows; items are the rendered content it carries (JSON
-- [{id, receivedAt, content}], newest first). Deleting the endpoint or the
-- receipt deletes its rows.

CREATE TABLE hook_pending (
	delivery    TEXT    NOT NULL REFERENCES hook_deliveries (id) ON DELETE CASCADE,
	endpoint    TEXT    NOT NULL REFERENCES hook_endpoints (slug) ON DELETE CASCADE,
	member      TEXT    NOT NULL DEFAULT '',
	kind        TEXT    NOT NULL CHECK (kind IN ('queue', 'wait', 'debounce')),
	received_at INTEGER NOT NULL, -- the owning receipt's
	due_at      INTEGER NOT NULL,
	level       TEXT    NOT NULL,
	items       TEXT    NOT NULL,
	PRIMARY KEY (delivery, member, kind)
) STRICT;

CREATE INDEX hook_pending_member ON hook_pending (kind, member, endpoint, received_at);
CREATE INDEX hook_pending_endpoint ON hook_pending (endpoint, kind, received_at);
CREATE INDEX hook_pending_due ON hook_pending (due_at);
