// Package notify is the inbound-hook capability: the admin API of
// endpoints, profiles and receipts (Admin), ingress (POST /hooks/{slug}),
// verification, dedupe, filters and the delivery policy (the offline
// queue, the busy wait, the debounce buffer) with the one loop that
// flushes, forces and expires them, and the briefing section of the
// members it reaches (docs/HOOKS.md). Its dependencies are explicit
// (Deps); it never imports the server root.
package notify

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"svc/server/auth"
	"svc/server/kek"
	"svc/server/registry"
	"svc/store"
)

// Ingress bounds (docs/HOOKS.md, Limits).
const (
	// MaxBody is the most bytes an ingress body may carry, and a
	// receipt keeps; the gateway reads one byte more to tell an
	// oversized body.
	MaxBody = 256 << 10
	// RateLimit is the requests one endpoint takes a minute (sliding).
	RateLimit = 120
	rateKeys  = 10000
	// RejectLimit and RejectAddrLimit are the failed verifications one
	// endpoint, and one client address over all endpoints, take a minute
	// (sliding): failures have their own budget, so a sender without the
	// secret cannot spend the endpoint's RateLimit and close it to its
	// real sender (docs/HOOKS.md, Limits).
	RejectLimit     = 120
	RejectAddrLimit = 30
	dedupeWindow    = 24 * time.Hour
)

// Committer commits the service's changes on the broker's message
// committer, so a message never reaches a stream before what it reports
// is durable.
type Committer struct {
	// Commit runs fn in the transaction of the next batch, with no
	// messages.
	Commit func(ctx context.Context, fn func(ctx context.Context, tx store.Tx) error) error
	// CommitStored runs apply in the next batch and commits the messages
	// it returns; stored (when not nil) then runs in the same transaction
	// with them, their Seq set, when there are any.
	CommitStored func(ctx context.Context, apply func(ctx context.Context, tx store.Tx) ([]store.Message, error),
		stored func(ctx context.Context, tx store.Tx, msgs []store.Message) error) error
}

// Members is what the service needs to know of a member target now:
// whether it is on the team, has a live stream, and is working (and
// until when that lapses).
type Members struct {
	Known  func(name string) bool
	Online func(name string) bool
	Busy   func(name string) (busy bool, until time.Time)
}

// Deps are the service's dependencies.
type Deps struct {
	Store   store.Store
	Commit  Committer
	Members Members
	// Registry is the registry kit endpoints and profiles change on:
	// their events, sealing their secrets, the managers told.
	Registry *registry.Kit
	// KEK opens the sealed secrets (nil: none active; every delivery to
	// an endpoint with a secret is rejected).
	KEK *kek.KEK
	// Count counts an ingress request by its receipt's status on arrival
	// (nil: not counted).
	Count func(status string)
	// Shared counts the ingress limits with the team's other brokers
	// (zero: this broker serves the team alone).
	Shared SharedLimits
	// RateLimit is the verified requests one endpoint takes a minute
	// (zero: RateLimit); tests of several brokers lower it.
	RateLimit int
	// MessageID renders a stored message's id, as receipts name them.
	MessageID func(seq int64) string
	Now       func() time.Time
	Log       *slog.Logger
}

// SharedLimits counts ingress limits in the store, with every broker of
// the team (docs/DECISIONS.md, "Rate limits across brokers").
type SharedLimits struct {
	// On reports whether other brokers serve the team: only then are the
	// limits counted in the store too. Nil: never.
	On func() bool
	// Count counts one hit of key in tx when key has had fewer than limit
	// in the window ending now, and answers zero; else it counts nothing
	// and answers how long until one is allowed.
	Count func(ctx context.Context, tx store.Tx, key string, limit int, window time.Duration) (time.Duration, error)
}

// Service is the inbound-hook capability. Run its loop with Run; poke it
// when a member's reach changes (a stream, a presence report).
type Service struct {
	d Deps
	// endpoints and profiles are the two registries of the capability
	// on the kit.
	endpoints registry.Of[Endpoint]
	profiles  registry.Of[store.HookProfile]
	limit     *auth.WindowLimiter
	// rejects and rejectAddrs are the budgets of failed verifications,
	// per endpoint and per client address.
	rejects, rejectAddrs *auth.WindowLimiter
	wake                 chan struct{}
	// reach wakes Announce (several brokers); due too, when this
	// broker wrote rows the loop times (a notice to the holder).
	reach, due chan struct{}
	mu         sync.Mutex // one scheduler pass at a time
	// pruned is when old receipts were last pruned (at most once a
	// minute: passes follow every delivery under load).
	pruned time.Time
	// lease is the loop's lease on several brokers.
	lease leased
}

// New returns a Service over d.
func New(d Deps) *Service {
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.RateLimit <= 0 {
		d.RateLimit = RateLimit
	}
	return &Service{
		d: d, limit: auth.NewWindowLimiter(d.RateLimit, time.Minute, rateKeys, d.Now), wake: make(chan struct{}, 1), reach: make(chan struct{}, 1), due: make(chan struct{}, 1),
		rejects:     auth.NewWindowLimiter(RejectLimit, time.Minute, rateKeys, d.Now),
		rejectAddrs: auth.NewWindowLimiter(RejectAddrLimit, time.Minute, rateKeys, d.Now),
		endpoints: registry.Of[Endpoint]{
			Kit: d.Registry, Kind: registry.NotificationEndpoints,
			Get: func(ctx context.Context, tx store.Tx, slug string) (Endpoint, error) { return Read(ctx, tx, slug) },
			// Told of an endpoint's changes: its direct member targets.
			Audience: func(e Endpoint) (bool, []string) { return false, e.MemberTargets() },
		},
		profiles: registry.Of[store.HookProfile]{
			Kit: d.Registry, Kind: registry.NotificationProfiles,
			Get: func(ctx context.Context, tx store.Tx, slug string) (store.HookProfile, error) {
				return tx.GetHookProfile(ctx, slug)
			},
			// A profile reaches nobody by itself: the managers alone are
			// told (docs/HOOKS.md, Profile events).
			Audience: func(store.HookProfile) (bool, []string) { return false, nil },
		},
	}
}

func (s *Service) now() time.Time { return s.d.Now() }

func (s *Service) count(status string) {
	if s.d.Count != nil {
		s.d.Count(status)
	}
}

// open decrypts a sealed secret for purpose; an error without a KEK.
func (s *Service) open(sealed []byte, purpose string) ([]byte, error) {
	if s.d.KEK == nil {
		return nil, fmt.Errorf("no key-encryption key is active")
	}
	var v kek.Sealed
	if err := json.Unmarshal(sealed, &v); err != nil {
		return nil, fmt.Errorf("sealed value: %w", err)
	}
	return s.d.KEK.Open(v, purpose)
}
