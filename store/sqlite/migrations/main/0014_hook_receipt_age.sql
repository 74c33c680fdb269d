-- Receipts are pruned by age (docs/HOOKS.md, Receipts): the sweep finds
-- the oldest through this index.

CREATE INDEX hook_deliveries_received ON hook_deliveries (received_at);
