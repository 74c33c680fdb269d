package activity

import (
	"context"
	"maps"
	"reflect"
	"sync"
	"sync/atomic"

	"svc/redact"
	"svc/server/otlp"
)

// redactors caches the team's redactor: every secret value the team
// holds, decrypted, compiled into the patterns redaction searches. OTLP
// ingest is a hot path, and decrypting every secret for every export would
// cost more than the redaction itself. Any change to any secret (value,
// binding, allMembers, deletion) moves gen on once committed
// (SecretsChanged), so the next ingest builds the redactor again (docs/
// TELEMETRY.md, "Redaction at ingest").
type redactors struct {
	gen atomic.Uint64
	mu  sync.Mutex
	r   *redact.Redactor
	at  uint64 // the gen r was built at
}

// SecretsChanged drops the cached redactor: call it after a change to a
// secret commits, never before (a redactor built between the two would be
// kept under the new generation with the old values).
func (s *Service) SecretsChanged() { s.redactors.gen.Add(1) }

// redactor returns the redactor of telemetry ingested from any member:
// every secret value of the team, bound to that member or not, enabled or
// not (a value once handed out stays a secret, and an agent may have read
// another's), and every svc bearer token.
func (s *Service) redactor(ctx context.Context) (*redact.Redactor, error) {
	rc := &s.redactors
	gen := rc.gen.Load()
	rc.mu.Lock()
	r, at := rc.r, rc.at
	rc.mu.Unlock()
	if r != nil && at == gen {
		return r, nil
	}
	values, err := s.d.Secrets(ctx)
	if err != nil {
		return nil, err
	}
	r = redact.New(values...)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.r == nil || rc.at <= gen {
		rc.r, rc.at = r, gen
	}
	return r, nil
}

// redactRecords redacts OTLP records in place, before anything reads them:
// names, bodies, attribute keys and values, resource attributes. Records
// of one resource share its map; each map is redacted into a copy once.
func redactRecords(r *redact.Redactor, recs []otlp.Record) {
	resources := map[uintptr]map[string]string{}
	for i := range recs {
		rec := &recs[i]
		rec.Name = r.String(rec.Name)
		rec.Body = r.String(rec.Body)
		rec.Attrs = redactAttrs(r, rec.Attrs)
		if rec.Resource == nil {
			continue
		}
		key := reflect.ValueOf(rec.Resource).Pointer()
		red, ok := resources[key]
		if !ok {
			red = redactAttrs(r, maps.Clone(rec.Resource))
			resources[key] = red
		}
		rec.Resource = red
	}
}

// redactAttrs redacts the keys and values of attrs, in place.
func redactAttrs(r *redact.Redactor, attrs map[string]string) map[string]string {
	var renamed map[string]string
	for k, v := range attrs {
		if rk := r.String(k); rk != k {
			if renamed == nil {
				renamed = map[string]string{}
			}
			renamed[rk] = r.String(v)
			delete(attrs, k)
			continue
		}
		if rv := r.String(v); rv != v {
			attrs[k] = rv
		}
	}
	for k, v := range renamed {
		attrs[k] = v
	}
	return attrs
}
