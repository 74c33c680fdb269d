// Package hooks is the inbound-hook engine: verifiers, filters, templates
// and the message frame.
//
// PLACEHOLDER: this file only declares the engine's API so the
// Notifications service can be built beside it; the engine itself is
// built on branch i12-hookengine, and this file is deleted when the two
// branches are merged. Its functions refuse everything.
package hooks

import (
	"encoding/json"
	"errors"
	"net/http"
	"time"
)

type Auth struct {
	Kind       string `json:"kind"`
	HeaderName string `json:"headerName,omitempty"`
	Prefix     string `json:"prefix,omitempty"`
}

func (a Auth) WithDefaults() Auth { return a }
func (a Auth) Validate() error    { return errPlaceholder }

func ValidateSecret(kind, secret string) error { return errPlaceholder }

type Rejected struct{ Reason string }

func (r *Rejected) Error() string { return "rejected: " + r.Reason }

const (
	ReasonNoSecret          = "no secret"
	ReasonMissingHeader     = "missing header"
	ReasonPrefixMismatch    = "prefix mismatch"
	ReasonSignatureMismatch = "signature mismatch"
	ReasonMalformedHeader   = "malformed header"
	ReasonStaleTimestamp    = "stale timestamp"
)

func Verify(a Auth, secret string, h http.Header, body []byte, now time.Time) error {
	return &Rejected{Reason: ReasonNoSecret}
}

type Filter struct {
	Path  string          `json:"path"`
	Op    string          `json:"op"`
	Value json.RawMessage `json:"value,omitempty"`
}

type InvalidError struct{ Field, Message string }

func (e *InvalidError) Error() string { return e.Field + ": " + e.Message }

func (f Filter) Validate() error                     { return errPlaceholder }
func Match(filters []Filter, payload []byte) bool    { return false }
func ValidateTemplate(t string) error                { return errPlaceholder }
func Content(template string, payload []byte) string { return "" }

const (
	MaxContent = 16 << 10
	MaxMessage = 64 << 10
)

type Frame struct {
	Slug, DisplayName string
	Items             []Item
	QueuedFor         time.Duration
}

type Item struct {
	DeliveryID string
	Received   time.Time
	Content    string
}

func (f Frame) Render() string { return "" }

func DedupeKey(h http.Header, header string) string { return "" }

var errPlaceholder = errors.New("hooks: placeholder, see i12-hookengine")
