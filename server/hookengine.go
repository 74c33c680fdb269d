package server

import (
	"net/http"
	"time"

	"svc/server/hooks"
)

// HookEngine is what the Notifications service needs of the inbound-hook
// engine (package hooks): validation of auth configs, secrets, filters and
// templates at save time; verification, dedupe keys, filtering, content
// and the message frame at delivery. hooksEngine adapts the package's
// functions; tests stand in a fake.
type HookEngine interface {
	// AuthDefaults fills a config's default header name and prefix.
	AuthDefaults(a hooks.Auth) hooks.Auth
	// ValidateAuth, ValidateFilter and ValidateTemplate answer a
	// *hooks.InvalidError for a config the engine refuses.
	ValidateAuth(a hooks.Auth) error
	ValidateSecret(kind, secret string) error
	ValidateFilter(f hooks.Filter) error
	ValidateTemplate(t string) error
	// Verify answers nil or a *hooks.Rejected with its reason; it fails
	// closed (an empty secret rejects).
	Verify(a hooks.Auth, secret string, h http.Header, body []byte, now time.Time) error
	DedupeKey(h http.Header, header string) string
	Match(filters []hooks.Filter, payload []byte) bool
	Content(template string, payload []byte) string
	// Render answers the messages a frame becomes: every item, in order,
	// each message within the message size cap.
	Render(f hooks.Frame) []hooks.Part
}

// WithHookEngine sets the inbound-hook engine; the default is package
// hooks.
func WithHookEngine(e HookEngine) Option { return func(o *options) { o.hooks = e } }

// hooksEngine adapts package hooks to HookEngine.
type hooksEngine struct{}

func (hooksEngine) AuthDefaults(a hooks.Auth) hooks.Auth { return a.WithDefaults() }
func (hooksEngine) ValidateAuth(a hooks.Auth) error      { return a.Validate() }
func (hooksEngine) ValidateSecret(kind, secret string) error {
	return hooks.ValidateSecret(kind, secret)
}
func (hooksEngine) ValidateFilter(f hooks.Filter) error { return f.Validate() }
func (hooksEngine) ValidateTemplate(t string) error     { return hooks.ValidateTemplate(t) }
func (hooksEngine) Verify(a hooks.Auth, secret string, h http.Header, body []byte, now time.Time) error {
	return hooks.Verify(a, secret, h, body, now)
}
func (hooksEngine) DedupeKey(h http.Header, header string) string { return hooks.DedupeKey(h, header) }
func (hooksEngine) Match(filters []hooks.Filter, payload []byte) bool {
	return hooks.Match(filters, payload)
}
func (hooksEngine) Content(template string, payload []byte) string {
	return hooks.Content(template, payload)
}
func (hooksEngine) Render(f hooks.Frame) []hooks.Part { return f.Render() }

var _ HookEngine = hooksEngine{}
