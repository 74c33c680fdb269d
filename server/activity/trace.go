package activity

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"svc/server/wire"
	"time"

	apiv1 "svc/gen/svc/v1"
	"svc/server/auth"
	"svc/store"
)

// holding is a time range during which a member held an objective: the
// member of that name whose id is id ("" for any member of the name: an
// objective with no markers, or markers from before member ids).
type holding struct {
	member   string
	id       string
	from, to time.Time
}

// holdings are the intervals each member held o, from its markers (oldest
// first): every objective_open to the next objective_close of the same
// member, an open one running to the objective's end (now while it is
// live), overlapping intervals of one member merged. With no markers at
// all (an objective from before markers, or whose markers were pruned) it
// is the assignee's, createdAt to its end.
func holdings(o store.Objective, markers []store.ActivityEvent, now time.Time) []holding {
	end := now
	switch {
	case !o.CompletedAt.IsZero():
		end = o.CompletedAt
	case o.Status == store.StatusCancelled:
		end = o.UpdatedAt
	}
	if len(markers) == 0 {
		return []holding{{member: o.Assignee, from: o.CreatedAt, to: later(end, o.CreatedAt)}}
	}
	// Members of one name are told apart by their ids: a name deleted and
	// created again holds the objective as another member.
	type who struct{ member, id string }
	markers = slices.Clone(markers)
	slices.SortStableFunc(markers, func(a, b store.ActivityEvent) int {
		return cmp.Or(a.TS.Compare(b.TS), cmp.Compare(a.ID, b.ID))
	})
	var out []holding
	open := map[who]time.Time{}
	for _, m := range markers {
		w := who{m.Member, m.MemberUID}
		switch m.Kind {
		case store.KindObjectiveOpen:
			if _, ok := open[w]; !ok {
				open[w] = m.TS
			}
		case store.KindObjectiveClose:
			from, ok := open[w]
			if !ok {
				// Its open marker is gone (pruned): from the start.
				from = o.CreatedAt
			}
			delete(open, w)
			out = append(out, holding{member: m.Member, id: m.MemberUID, from: from, to: later(m.TS, from)})
		}
	}
	for w, from := range open {
		out = append(out, holding{member: w.member, id: w.id, from: from, to: later(end, from)})
	}
	slices.SortFunc(out, func(a, b holding) int {
		return cmp.Or(cmp.Compare(a.member, b.member), cmp.Compare(a.id, b.id), a.from.Compare(b.from))
	})
	merged := out[:0]
	for _, h := range out {
		if n := len(merged); n > 0 && merged[n-1].member == h.member && merged[n-1].id == h.id && !h.from.After(merged[n-1].to) {
			merged[n-1].to = later(merged[n-1].to, h.to)
			continue
		}
		merged = append(merged, h)
	}
	return merged
}

// objectiveHoldings loads objective id and the holdings p may see: every
// holder's with activity.read, else p's own, which it must have (or be the
// assignee). p's own are those of p's member id: an earlier, deleted member
// of p's name held the others.
func (s *Service) objectiveHoldings(ctx context.Context, p *auth.Principal, id string) ([]holding, error) {
	o, err := s.d.Objective(ctx, id)
	if err != nil {
		return nil, err
	}
	if s.d.Store == nil {
		return nil, errNoActivityStore
	}
	markers, err := s.d.Store.ObjectiveMarkers(ctx, o.ID)
	if err != nil {
		return nil, err
	}
	hs := holdings(o, markers, s.now())
	if p.Has(auth.ActivityRead) {
		return hs, nil
	}
	self, _ := s.d.Members.Current(p.Member)
	mine := slices.DeleteFunc(hs, func(h holding) bool { return h.member != p.Member || (h.id != "" && h.id != self) })
	for i := range mine {
		// A holding of any member of the name reads only this member's rows.
		mine[i].id = self
	}
	// The assignee sees the trace of an objective it has not held yet.
	if len(mine) == 0 && !(o.Assignee == p.Member && (o.AssigneeID == "" || o.AssigneeID == self)) {
		return nil, fmt.Errorf("%w: an objective's trace needs %s, or to have held the objective", auth.ErrForbidden, auth.ActivityRead)
	}
	return mine, nil
}

// GetObjectiveTrace implements apiv1.ActivityServer: the activity of every
// holding, oldest first, each llm_exchange joined with the inference record
// of its responseId (else one its window contains), records no exchange
// took as rows of their own. At most 1,000 rows, the first ones, with
// truncated set when there were more.
func (s *Service) GetObjectiveTrace(ctx context.Context, req *apiv1.GetObjectiveTraceRequest) (*apiv1.GetObjectiveTraceResponse, error) {
	p := principal(ctx)
	hs, err := s.objectiveHoldings(ctx, p, req.GetId())
	if err != nil {
		return nil, err
	}
	resp := &apiv1.GetObjectiveTraceResponse{}
	var rows []*apiv1.TraceRow
	for _, h := range hs {
		hr, more, err := s.traceRows(ctx, h)
		if err != nil {
			return nil, err
		}
		rows = append(rows, hr...)
		resp.Truncated = resp.Truncated || more
	}
	slices.SortStableFunc(rows, func(a, b *apiv1.TraceRow) int { return cmp.Compare(a.GetTs(), b.GetTs()) })
	if len(rows) > maxActivityRows {
		rows, resp.Truncated = rows[:maxActivityRows], true
	}
	resp.Rows = rows
	return resp, nil
}

// exchangeRef is what a join reads of an llm_exchange row.
type exchangeRef struct {
	ResponseID string  `json:"responseId"`
	Model      string  `json:"model"`
	DurationMs float64 `json:"durationMs"`
}

// traceRows returns the rows of one holding, oldest first, and whether the
// holding has more than one answer carries.
func (s *Service) traceRows(ctx context.Context, h holding) ([]*apiv1.TraceRow, bool, error) {
	acts, err := s.d.Store.ListActivity(ctx, store.ActivityFilter{
		Member: h.member, MemberUID: h.id, From: h.from, To: h.to, OldestFirst: true, Limit: maxActivityRows + 1, MaxBytes: maxListBytes / 2,
	})
	if err != nil {
		return nil, false, err
	}
	recs, err := s.d.Store.ListGenAI(ctx, store.GenAIFilter{Member: h.member, MemberUID: h.id, From: h.from, To: h.to, Limit: maxActivityRows + 1, MaxBytes: maxListBytes / 2})
	if err != nil {
		return nil, false, err
	}
	more := len(acts) > maxActivityRows || len(recs) > maxActivityRows ||
		activityBytes(acts) >= maxListBytes/2 || genaiBytes(recs) >= maxListBytes/2
	acts, recs = acts[:min(len(acts), maxActivityRows)], recs[:min(len(recs), maxActivityRows)]

	refs := make([]exchangeRef, len(acts))
	byResp := map[string]int{} // response id → index in recs
	for i, r := range recs {
		if r.ResponseID != "" {
			byResp[r.ResponseID] = i
		}
	}
	var missing []string
	for i, a := range acts {
		if a.Kind != store.KindLLMExchange {
			continue
		}
		_ = json.Unmarshal(a.Data, &refs[i])
		if id := refs[i].ResponseID; id != "" {
			if _, ok := byResp[id]; !ok {
				missing = append(missing, id)
			}
		}
	}
	if len(missing) > 0 {
		// A record captured just outside the holding still belongs to the
		// exchange inside it.
		extra, err := s.d.Store.GenAIByResponse(ctx, h.member, h.id, missing)
		if err != nil {
			return nil, false, err
		}
		for _, r := range extra {
			if _, ok := byResp[r.ResponseID]; !ok {
				byResp[r.ResponseID] = len(recs)
				recs = append(recs, r)
			}
		}
	}

	taken := make([]bool, len(recs))
	joined := make([]int, len(acts)) // index in recs + 1; 0 is none
	for i, a := range acts {
		if a.Kind != store.KindLLMExchange || refs[i].ResponseID == "" {
			continue
		}
		if j, ok := byResp[refs[i].ResponseID]; ok && !taken[j] {
			taken[j], joined[i] = true, j+1
		}
	}
	// Then by containment (store.JoinSlack): an exchange no record joined
	// by id takes the nearest record of its model captured within its
	// window, when the two share no response id to go by.
	for i, a := range acts {
		if a.Kind != store.KindLLMExchange || joined[i] != 0 {
			continue
		}
		dur := min(max(time.Duration(refs[i].DurationMs*float64(time.Millisecond)), 0), store.MaxJoinDuration)
		from, to := a.TS.Add(-dur-store.JoinSlack), a.TS.Add(store.JoinSlack)
		best := -1
		for j, r := range recs {
			if taken[j] || r.TS.Before(from) || r.TS.After(to) ||
				(refs[i].ResponseID != "" && r.ResponseID != "") ||
				(refs[i].Model != "" && r.Model != "" && r.Model != refs[i].Model) {
				continue
			}
			if best < 0 || r.TS.Sub(a.TS).Abs() < recs[best].TS.Sub(a.TS).Abs() {
				best = j
			}
		}
		if best >= 0 {
			taken[best], joined[i] = true, best+1
		}
	}

	out := make([]*apiv1.TraceRow, 0, len(acts)+len(recs))
	for i, a := range acts {
		row := &apiv1.TraceRow{Member: h.member, Ts: wire.MS(a.TS), Activity: s.activityRow(a)}
		if j := joined[i]; j != 0 {
			row.Inference = s.genaiRecord(recs[j-1])
		}
		row.MemberId, row.MemberDeleted, row.MemberDeletedAt = a.MemberUID, row.Activity.MemberDeleted, row.Activity.MemberDeletedAt
		out = append(out, row)
	}
	for j, r := range recs {
		if !taken[j] && !r.TS.Before(h.from) && !r.TS.After(h.to) {
			row := &apiv1.TraceRow{Member: h.member, Ts: wire.MS(r.TS), Inference: s.genaiRecord(r)}
			row.MemberId, row.MemberDeleted, row.MemberDeletedAt = r.MemberUID, row.Inference.MemberDeleted, row.Inference.MemberDeletedAt
			out = append(out, row)
		}
	}
	slices.SortStableFunc(out, func(a, b *apiv1.TraceRow) int { return cmp.Compare(a.GetTs(), b.GetTs()) })
	return out, more, nil
}

// GetObjectiveUsage implements apiv1.ActivityServer: the usage of every
// holding the caller may see, summed in total, per model and per holder.
func (s *Service) GetObjectiveUsage(ctx context.Context, req *apiv1.GetObjectiveUsageRequest) (*apiv1.GetObjectiveUsageResponse, error) {
	p := principal(ctx)
	hs, err := s.objectiveHoldings(ctx, p, req.GetId())
	if err != nil {
		return nil, err
	}
	sum := newUsageSum(s.prices)
	for _, h := range hs {
		gs, err := s.d.Store.ActivityUsage(ctx, s.usageFilter(h.member, h.id, h.from, h.to))
		if err != nil {
			return nil, err
		}
		sum.add(h.member, gs)
	}
	return &apiv1.GetObjectiveUsageResponse{Usage: sum.total, Models: modelList(sum.models), Members: s.memberList(sum)}, nil
}

// activityBytes is the data size of rows, as the byte budget counts it.
func activityBytes(rows []store.ActivityEvent) int {
	n := 0
	for _, r := range rows {
		n += len(r.Data)
	}
	return n
}

// genaiBytes is the size of records' message arrays and tool
// definitions, as the byte budget counts it.
func genaiBytes(recs []store.GenAIRecord) int {
	n := 0
	for _, r := range recs {
		n += len(r.SystemInstructions) + len(r.InputMessages) + len(r.OutputMessages) + len(r.ToolDefinitions)
	}
	return n
}

// later is the later of two times.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
