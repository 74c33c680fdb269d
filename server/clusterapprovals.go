package server

import (
	"context"
	"time"

	"svc/store"
)

// Approvals on several brokers (docs/DECISIONS.md, "Hook schedulers on
// several brokers"): the store decides (a decision is written once, on
// any broker), but each broker's index of pending approvals drives
// presence's blocked state and the expiry timer. An approval asked on A
// and decided on B would stay in A's index (blocked until it expires),
// and one asked on A after B started would be expired by nobody once A
// died. So each broker re-reads the pending approvals every
// approvalSync and makes its index equal to them.

const approvalSync = 2 * time.Second

// runApprovalSync keeps the index equal to the store's pending approvals
// until ctx ends.
func (c *core) runApprovalSync(ctx context.Context) {
	t := time.NewTicker(approvalSync)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := c.syncApprovals(ctx); err != nil && ctx.Err() == nil {
			c.log.WarnContext(ctx, "pending approvals not re-read; retried", "err", err)
		}
	}
}

// syncApprovals adds the pending approvals the index lacks and removes
// those it holds that are no longer pending. An approval added while the
// store is read is kept: only what the index held before the read and the
// read no longer finds goes.
func (c *core) syncApprovals(ctx context.Context) error {
	x := c.approvals
	x.mu.Lock()
	before := make([]string, 0, len(x.byID))
	for id := range x.byID {
		before = append(before, id)
	}
	x.mu.Unlock()
	list, err := c.store.ListApprovals(ctx, store.ApprovalFilter{Statuses: []string{store.ApprovalPending}, Limit: 1 << 20})
	if err != nil {
		return err
	}
	pending := make(map[string]bool, len(list))
	for _, a := range list {
		pending[a.ID] = true
		x.add(a.ID, a.Member, a.ExpiresAt)
	}
	for _, id := range before {
		if !pending[id] {
			x.remove(id)
		}
	}
	return nil
}
