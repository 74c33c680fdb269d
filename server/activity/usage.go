package activity

import (
	"cmp"
	"slices"
	"svc/server/wire"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	apiv1 "svc/gen/svc/v1"
	"svc/server/pricing"
	"svc/store"
)

// activityRow renders a stored row for a reader: whose member of the name
// it is, and, for an exchange that carried no cost, the cost the price
// table gives it (docs/TELEMETRY.md, Costs).
func (s *Service) activityRow(r store.ActivityEvent) *apiv1.ActivityRow {
	row := activityRowToProto(r)
	row.MemberId = r.MemberUID
	row.MemberDeleted, row.MemberDeletedAt = s.memberLabel(r.Member, r.MemberUID)
	if r.Kind == store.KindLLMExchange {
		s.priceExchange(row.Data)
	}
	return row
}

// genaiRecord renders a stored inference record for a reader, with its
// member's label and the cost of its tokens.
func (s *Service) genaiRecord(r store.GenAIRecord) *apiv1.GenAiRecord {
	out := genaiToProto(r)
	out.MemberId = r.MemberUID
	out.MemberDeleted, out.MemberDeletedAt = s.memberLabel(r.Member, r.MemberUID)
	tok := pricing.Tokens{
		Input: max(r.Usage.InputTokens, 0), Output: max(r.Usage.OutputTokens, 0),
		CacheRead: max(r.Usage.CacheReadTokens, 0), CacheWrite: max(r.Usage.CacheCreationTokens, 0),
	}
	if cost, ok := s.prices.Cost(r.Model, tok); ok {
		out.CostUsd, out.CostComputed = &cost, true
	}
	return out
}

// memberLabel says whether id is a deleted member of name, and when it was
// deleted when that is known.
func (s *Service) memberLabel(name, id string) (bool, *float64) {
	deleted, at := s.d.Members.Label(name, id)
	return deleted, wire.OptMS(at)
}

// priceExchange sets costUsd and costComputed on an exchange's data that
// carries no costUsd of its own, when it has tokens and the price table a
// price for its model. The agent's own cost always wins.
func (s *Service) priceExchange(data *structpb.Struct) {
	f := data.GetFields()
	if _, ok := f["costUsd"].GetKind().(*structpb.Value_NumberValue); ok {
		return
	}
	model := f["model"].GetStringValue()
	u := f["usage"].GetStructValue().GetFields()
	count := func(k string) int64 {
		v, ok := u[k].GetKind().(*structpb.Value_NumberValue)
		if !ok || !(v.NumberValue > 0) || v.NumberValue > 1e15 {
			return 0
		}
		return int64(v.NumberValue)
	}
	tok := pricing.Tokens{
		Input: count("inputTokens"), Output: count("outputTokens"),
		CacheRead: count("cacheReadTokens"), CacheWrite: count("cacheCreationTokens"),
	}
	if tok.Zero() {
		return
	}
	cost, ok := s.prices.Cost(model, tok)
	if !ok {
		return
	}
	f["costUsd"] = structpb.NewNumberValue(cost)
	f["costComputed"] = structpb.NewBoolValue(true)
}

// usageSum adds up usage groups: in total, per model and per member id.
type usageSum struct {
	prices  *pricing.Table
	total   *apiv1.Usage
	models  map[string]*apiv1.ModelUsage
	members map[memberKey]*memberSum
}

// memberKey is one member of a name.
type memberKey struct{ name, id string }

type memberSum struct {
	usage  *apiv1.Usage
	models map[string]*apiv1.ModelUsage
}

func newUsageSum(prices *pricing.Table) *usageSum {
	return &usageSum{prices: prices, total: &apiv1.Usage{}, models: map[string]*apiv1.ModelUsage{}, members: map[memberKey]*memberSum{}}
}

// add sums the groups of member name.
func (s *usageSum) add(name string, gs []store.UsageGroup) {
	for _, g := range gs {
		computed, unpriced := 0.0, int64(0)
		if g.NoCostExchanges > 0 {
			tok := pricing.Tokens{
				Input: g.NoCost.InputTokens, Output: g.NoCost.OutputTokens,
				CacheRead: g.NoCost.CacheReadTokens, CacheWrite: g.NoCost.CacheCreationTokens,
			}
			if c, ok := s.prices.CostSum(g.Model, g.Bucket, tok); ok {
				computed = c
			} else {
				unpriced = g.NoCostExchanges
			}
		}
		m := s.member(name, g.MemberUID)
		for _, u := range []*apiv1.Usage{s.total, m.usage} {
			addUsage(u, g, computed, unpriced)
		}
		for _, ms := range []map[string]*apiv1.ModelUsage{s.models, m.models} {
			addModelUsage(s.modelUsage(ms, g.Model), g, computed, unpriced)
		}
	}
}

func (s *usageSum) member(name, id string) *memberSum {
	k := memberKey{name, id}
	m := s.members[k]
	if m == nil {
		m = &memberSum{usage: &apiv1.Usage{}, models: map[string]*apiv1.ModelUsage{}}
		s.members[k] = m
	}
	return m
}

func (s *usageSum) modelUsage(ms map[string]*apiv1.ModelUsage, model string) *apiv1.ModelUsage {
	mu := ms[model]
	if mu == nil {
		mu = &apiv1.ModelUsage{Model: model, CostUsd: new(float64)}
		if key, _, ok := s.prices.Lookup(model); ok {
			mu.PricedAs = &key
		}
		ms[model] = mu
	}
	return mu
}

func addUsage(u *apiv1.Usage, g store.UsageGroup, computed float64, unpriced int64) {
	u.InputTokens += float64(g.InputTokens)
	u.OutputTokens += float64(g.OutputTokens)
	u.CacheReadTokens += float64(g.CacheReadTokens)
	u.CacheCreationTokens += float64(g.CacheCreationTokens)
	u.Exchanges += float64(g.Exchanges)
	u.CostUsd += g.CostUSD + computed
	u.CostComputedUsd += computed
	u.UnpricedExchanges += float64(unpriced)
}

func addModelUsage(m *apiv1.ModelUsage, g store.UsageGroup, computed float64, unpriced int64) {
	m.InputTokens += float64(g.InputTokens)
	m.OutputTokens += float64(g.OutputTokens)
	m.CacheReadTokens += float64(g.CacheReadTokens)
	m.CacheCreationTokens += float64(g.CacheCreationTokens)
	m.Exchanges += float64(g.Exchanges)
	m.CostComputedUsd += computed
	m.UnpricedExchanges += float64(unpriced)
	if m.CostUsd != nil {
		*m.CostUsd += g.CostUSD + computed
	}
	if m.UnpricedExchanges > 0 {
		// Some of this model's cost is unknown: so is its cost.
		m.CostUsd = nil
	}
}

// modelList orders a model breakdown by model id.
func modelList(ms map[string]*apiv1.ModelUsage) []*apiv1.ModelUsage {
	out := make([]*apiv1.ModelUsage, 0, len(ms))
	for _, m := range ms {
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b *apiv1.ModelUsage) int { return cmp.Compare(a.GetModel(), b.GetModel()) })
	return out
}

// memberList orders the member breakdown: by name, each name's current
// member first, then its deleted ones by when they were deleted.
func (s *Service) memberList(sum *usageSum) []*apiv1.MemberUsage {
	out := make([]*apiv1.MemberUsage, 0, len(sum.members))
	for k, m := range sum.members {
		deleted, at := s.memberLabel(k.name, k.id)
		out = append(out, &apiv1.MemberUsage{
			Member: k.name, MemberId: k.id, MemberDeleted: deleted, MemberDeletedAt: at,
			Usage: m.usage, Models: modelList(m.models),
		})
	}
	slices.SortFunc(out, func(a, b *apiv1.MemberUsage) int {
		if c := cmp.Compare(a.GetMember(), b.GetMember()); c != 0 {
			return c
		}
		if a.GetMemberDeleted() != b.GetMemberDeleted() {
			if a.GetMemberDeleted() {
				return 1
			}
			return -1
		}
		return cmp.Or(cmp.Compare(a.GetMemberDeletedAt(), b.GetMemberDeletedAt()), cmp.Compare(a.GetMemberId(), b.GetMemberId()))
	})
	return out
}

// usageFilter is the store filter of member's usage (of its member id,
// when set) over [from, to].
func (s *Service) usageFilter(member, id string, from, to time.Time) store.UsageFilter {
	return store.UsageFilter{Member: member, MemberUID: id, From: from, To: to, Thresholds: s.prices.Thresholds()}
}
