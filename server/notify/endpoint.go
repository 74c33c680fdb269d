package notify

import (
	"context"
	"encoding/json"
	"fmt"

	"svc/server/hooks"
	"svc/server/registry"
	"svc/store"
)

// Policy defaults (docs/HOOKS.md, Delivery policy).
const (
	DefaultDebounceMax = 20
	DefaultQueueTTLMs  = 24 * 60 * 60 * 1000
	DefaultMaxWaitMs   = 15 * 60 * 1000
)

// Target is a stored target: a member name or a channel id.
type Target struct {
	Member  string `json:"member,omitempty"`
	Channel string `json:"channel,omitempty"`
}

// Policy is a stored delivery policy. Level "" is the endpoint's.
type Policy struct {
	IfOffline   string `json:"ifOffline"`
	IfBusy      string `json:"ifBusy"`
	DebounceMs  int32  `json:"debounceMs"`
	DebounceMax int32  `json:"debounceMax"`
	QueueTTLMs  int32  `json:"queueTtlMs"`
	MaxWaitMs   int32  `json:"maxWaitMs"`
	Level       string `json:"level,omitempty"`
}

// DefaultPolicy is the policy of an endpoint created without one.
func DefaultPolicy() Policy {
	return Policy{IfOffline: "drop", IfBusy: "now", DebounceMax: DefaultDebounceMax, QueueTTLMs: DefaultQueueTTLMs, MaxWaitMs: DefaultMaxWaitMs}
}

// Endpoint is an endpoint as the service works with it: the stored
// record with its JSON columns decoded once, when it is read. Its typed
// Targets, Filters and Policy are the truth (they stand in front of the
// record's raw columns of the same names); Record encodes them for a
// write.
type Endpoint struct {
	store.HookEndpoint
	Targets []Target
	Filters []hooks.Filter
	Policy  Policy
}

// Decode decodes a stored endpoint's JSON columns. A column that does not
// decode is an error naming the endpoint: read as empty, it would deliver
// to nobody, or past every filter, without a word.
func Decode(r store.HookEndpoint) (Endpoint, error) {
	e := Endpoint{HookEndpoint: r, Policy: DefaultPolicy()}
	for _, col := range []struct {
		name string
		raw  []byte
		dst  any
	}{{"targets", r.Targets, &e.Targets}, {"filters", r.Filters, &e.Filters}, {"policy", r.Policy, &e.Policy}} {
		if len(col.raw) == 0 {
			continue
		}
		if err := json.Unmarshal(col.raw, col.dst); err != nil {
			return Endpoint{}, fmt.Errorf("notification endpoint %q: stored %s: %w", r.Slug, col.name, err)
		}
	}
	return e, nil
}

// Reader is where an endpoint is read from: the store, or a transaction.
type Reader interface {
	GetHookEndpoint(ctx context.Context, slug string) (store.HookEndpoint, error)
}

// Read reads and decodes the endpoint slug.
func Read(ctx context.Context, r Reader, slug string) (Endpoint, error) {
	rec, err := r.GetHookEndpoint(ctx, slug)
	if err != nil {
		return Endpoint{}, err
	}
	return Decode(rec)
}

// List reads and decodes every endpoint.
func List(ctx context.Context, st store.Store) ([]Endpoint, error) {
	rs, err := st.ListHookEndpoints(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Endpoint, len(rs))
	for i, r := range rs {
		if out[i], err = Decode(r); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Record is e as the store keeps it, its typed fields encoded.
func (e Endpoint) Record() (store.HookEndpoint, error) {
	r := e.HookEndpoint
	targets := e.Targets
	if targets == nil {
		targets = []Target{}
	}
	filters := e.Filters
	if filters == nil {
		filters = []hooks.Filter{}
	}
	var err error
	if r.Targets, err = json.Marshal(targets); err != nil {
		return r, err
	}
	if r.Filters, err = json.Marshal(filters); err != nil {
		return r, err
	}
	r.Policy, err = json.Marshal(e.Policy)
	return r, err
}

// MemberTargets are an endpoint's direct member targets.
func (e Endpoint) MemberTargets() []string {
	var out []string
	for _, t := range e.Targets {
		if t.Member != "" {
			out = append(out, t.Member)
		}
	}
	return out
}

// EndpointPurpose and ProfilePurpose bind a sealed secret to its endpoint
// or profile: the purposes of their registries' Kinds.
func EndpointPurpose(slug string) string { return registry.NotificationEndpoints.PurposeOf(slug) }
func ProfilePurpose(slug string) string  { return registry.NotificationProfiles.PurposeOf(slug) }
