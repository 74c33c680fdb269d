package server

import (
	"context"
	"maps"
	"reflect"
	"sync"
	"sync/atomic"

	"svc/redact"
	"svc/server/otlp"
)

// redactors caches each member's redactor: the secret values it may use,
// decrypted, compiled into the patterns redaction searches. OTLP ingest
// is a hot path, and decrypting every secret for every export would cost
// more than the redaction itself. Any change to any secret (value,
// binding, allMembers, deletion) moves gen on once committed, so the next
// ingest of every member builds its redactor again (docs/TELEMETRY.md,
// "Redaction at ingest").
type redactors struct {
	gen atomic.Uint64
	mu  sync.Mutex
	m   map[string]cachedRedactor
}

type cachedRedactor struct {
	gen uint64
	r   *redact.Redactor
}

// secretsChanged drops every cached redactor: called after a change to a
// secret commits, never before (a redactor built between the two would be
// kept under the new generation with the old values).
func (c *core) secretsChanged() { c.redactors.gen.Add(1) }

// redactor returns member's redactor: every secret value it may use,
// disabled ones included (a value once handed out stays a secret), and
// every svc bearer token.
func (c *core) redactor(ctx context.Context, member string) (*redact.Redactor, error) {
	rc := &c.redactors
	gen := rc.gen.Load()
	rc.mu.Lock()
	e, ok := rc.m[member]
	rc.mu.Unlock()
	if ok && e.gen == gen {
		return e.r, nil
	}
	secrets, err := c.memberSecrets(ctx, member, false)
	if err != nil {
		return nil, err
	}
	values := make([]string, len(secrets))
	for i, s := range secrets {
		values[i] = s.value
	}
	r := redact.New(values...)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.m == nil {
		rc.m = map[string]cachedRedactor{}
	}
	if cur, ok := rc.m[member]; !ok || cur.gen <= gen {
		rc.m[member] = cachedRedactor{gen: gen, r: r}
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
