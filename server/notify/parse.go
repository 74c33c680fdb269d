package notify

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"golang.org/x/net/http/httpguts"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	apiv1 "svc/gen/svc/v1"
	"svc/server/apierr"
	"svc/server/hooks"
	"svc/server/teamconfig"
	"svc/store"
)

// Endpoint and profile bounds (docs/HOOKS.md, Limits and Delivery
// policy).
const (
	maxSecret      = 4 << 10
	maxTargets     = 64
	maxFilters     = 32
	maxTemplate    = 8 << 10
	maxDisplayName = 128
	maxHeaderName  = 128
	maxPrefix      = 64
	maxFilterPath  = 256
	maxFilterValue = 4 << 10
	maxReceiptList = 500

	maxDebounceMs  = 10 * 60 * 1000
	maxDebounceMax = 100
	minQueueTTLMs  = 1000
	maxQueueTTLMs  = 7 * 24 * 60 * 60 * 1000
	minMaxWaitMs   = 1000
	maxMaxWaitMs   = 24 * 60 * 60 * 1000

	// maxEpochMS bounds an epoch-ms cursor (year 9999).
	maxEpochMS = 253402300799999
)

// defaultAuthKind is the inline verification kind of an endpoint created
// without auth or authProfile.
const defaultAuthKind = "hmac-sha256"

const levelsWant = "must be a LogLevel (debug, info, notice, warning, error, critical)"

// ParseTargets reads the targets of a request: a non-empty JSON array of
// {member: <name>} and {channel: <slug or id>} objects, each with exactly
// one of the two. Channels are resolved by lookup (a slug becomes the id).
// It touches nothing but its arguments, so it can be fuzzed.
func ParseTargets(l *structpb.ListValue, memberOK func(string) bool, channelID func(string) (string, bool)) ([]Target, error) {
	vals := l.GetValues()
	switch {
	case len(vals) == 0:
		return nil, apierr.Invalid("targets", "must list at least one {member} or {channel}")
	case len(vals) > maxTargets:
		return nil, apierr.Invalid("targets", "at most %d", maxTargets)
	}
	var out []Target
	for i, v := range vals {
		field := fmt.Sprintf("targets[%d]", i)
		obj := v.GetStructValue()
		if obj == nil || len(obj.GetFields()) != 1 {
			return nil, apierr.Invalid(field, "must be {member: <name>} or {channel: <slug or id>}")
		}
		var t Target
		for k, fv := range obj.GetFields() {
			s, ok := fv.GetKind().(*structpb.Value_StringValue)
			if !ok {
				return nil, apierr.Invalid(field+"."+k, "must be a string")
			}
			switch k {
			case "member":
				if !teamconfig.ValidName(s.StringValue) {
					return nil, apierr.Invalid(field+".member", "must be a member name")
				}
				if !memberOK(s.StringValue) {
					return nil, apierr.Invalid(field+".member", "no member %q", s.StringValue)
				}
				t.Member = s.StringValue
			case "channel":
				if s.StringValue == "" || len(s.StringValue) > 64 {
					return nil, apierr.Invalid(field+".channel", "must be a channel slug or id")
				}
				id, ok := channelID(s.StringValue)
				if !ok {
					return nil, apierr.Invalid(field+".channel", "no channel %q", s.StringValue)
				}
				t.Channel = id
			default:
				return nil, apierr.Invalid(field, "must be {member: <name>} or {channel: <slug or id>}")
			}
		}
		if slices.Contains(out, t) {
			return nil, apierr.Invalid(field, "is listed twice")
		}
		out = append(out, t)
	}
	return out, nil
}

// parseFilters reads a JSON array of {path, op, value} and validates each
// with the engine.
func parseFilters(l *structpb.ListValue) ([]hooks.Filter, error) {
	vals := l.GetValues()
	if len(vals) > maxFilters {
		return nil, apierr.Invalid("filters", "at most %d", maxFilters)
	}
	out := []hooks.Filter{}
	for i, v := range vals {
		field := fmt.Sprintf("filters[%d]", i)
		obj := v.GetStructValue()
		if obj == nil {
			return nil, apierr.Invalid(field, "must be {path, op, value}")
		}
		var f hooks.Filter
		for k, fv := range obj.GetFields() {
			switch k {
			case "path", "op":
				s, ok := fv.GetKind().(*structpb.Value_StringValue)
				if !ok {
					return nil, apierr.Invalid(field+"."+k, "must be a string")
				}
				if k == "path" {
					f.Path = s.StringValue
				} else {
					f.Op = s.StringValue
				}
			case "value":
				b, err := protojson.Marshal(fv)
				if err != nil {
					return nil, apierr.Invalid(field+".value", "must be JSON")
				}
				f.Value = b
			default:
				return nil, apierr.Invalid(field, "unknown field %q", k)
			}
		}
		switch {
		case len(f.Path) > maxFilterPath:
			return nil, apierr.Invalid(field+".path", "at most %d bytes", maxFilterPath)
		case len(f.Value) > maxFilterValue:
			return nil, apierr.Invalid(field+".value", "at most %d bytes of JSON", maxFilterValue)
		}
		if err := f.Validate(); err != nil {
			return nil, engineInvalid(field, err)
		}
		out = append(out, f)
	}
	return out, nil
}

// engineInvalid turns the engine's refusal into a 400 under field.
func engineInvalid(field string, err error) error {
	var ie *hooks.InvalidError
	if errors.As(err, &ie) {
		if ie.Field != "" {
			field += "." + ie.Field
		}
		return apierr.Invalid(field, "%s", ie.Message)
	}
	return apierr.Invalid(field, "%v", err)
}

// parseAuth validates an auth config and fills its defaults.
func parseAuth(field string, a *apiv1.NotificationAuth) (store.HookAuth, error) {
	if a.GetKind() == "" {
		return store.HookAuth{}, apierr.Invalid(field+".kind", "is required (hmac-sha256 or header-secret)")
	}
	if len(a.GetHeaderName()) > maxHeaderName || (a.HeaderName != nil && !httpguts.ValidHeaderFieldName(a.GetHeaderName())) {
		return store.HookAuth{}, apierr.Invalid(field+".headerName", "must be an HTTP header name of at most %d bytes", maxHeaderName)
	}
	if len(a.GetPrefix()) > maxPrefix {
		return store.HookAuth{}, apierr.Invalid(field+".prefix", "at most %d bytes", maxPrefix)
	}
	ha := hooks.Auth{Kind: a.GetKind(), HeaderName: a.GetHeaderName(), Prefix: a.GetPrefix()}.WithDefaults()
	if err := ha.Validate(); err != nil {
		return store.HookAuth{}, engineInvalid(field, err)
	}
	return store.HookAuth{Kind: ha.Kind, HeaderName: ha.HeaderName, Prefix: ha.Prefix}, nil
}

// defaultAuth is the inline auth of an endpoint created without one.
func defaultAuth() store.HookAuth {
	ha := hooks.Auth{Kind: defaultAuthKind}.WithDefaults()
	return store.HookAuth{Kind: ha.Kind, HeaderName: ha.HeaderName, Prefix: ha.Prefix}
}

// applyPolicy merges the fields req sets into p and checks the bounds.
func applyPolicy(p Policy, req *apiv1.NotificationPolicy) (Policy, error) {
	if req == nil {
		return p, nil
	}
	if req.IfOffline != nil {
		p.IfOffline = req.GetIfOffline()
	}
	if req.IfBusy != nil {
		p.IfBusy = req.GetIfBusy()
	}
	if req.DebounceMs != nil {
		p.DebounceMs = req.GetDebounceMs()
	}
	if req.DebounceMax != nil {
		p.DebounceMax = req.GetDebounceMax()
	}
	if req.QueueTtlMs != nil {
		p.QueueTTLMs = req.GetQueueTtlMs()
	}
	if req.MaxWaitMs != nil {
		p.MaxWaitMs = req.GetMaxWaitMs()
	}
	if req.Level != nil {
		p.Level = req.GetLevel()
	}
	return p, validatePolicy(p)
}

// validatePolicy checks a policy's values and bounds (docs/HOOKS.md).
func validatePolicy(p Policy) error {
	switch {
	case p.IfOffline != "drop" && p.IfOffline != "queue":
		return apierr.Invalid("policy.ifOffline", "must be drop or queue")
	case p.IfBusy != "now" && p.IfBusy != "wait":
		return apierr.Invalid("policy.ifBusy", "must be now or wait")
	case p.DebounceMs < 0 || p.DebounceMs > maxDebounceMs:
		return apierr.Invalid("policy.debounceMs", "must be 0 (off) to %d", maxDebounceMs)
	case p.DebounceMax < 1 || p.DebounceMax > maxDebounceMax:
		return apierr.Invalid("policy.debounceMax", "must be 1 to %d", maxDebounceMax)
	case p.QueueTTLMs < minQueueTTLMs || p.QueueTTLMs > maxQueueTTLMs:
		return apierr.Invalid("policy.queueTtlMs", "must be %d to %d", minQueueTTLMs, maxQueueTTLMs)
	case p.MaxWaitMs < minMaxWaitMs || p.MaxWaitMs > maxMaxWaitMs:
		return apierr.Invalid("policy.maxWaitMs", "must be %d to %d", minMaxWaitMs, maxMaxWaitMs)
	case p.Level != "" && !validLevel(p.Level):
		return apierr.Invalid("policy.level", levelsWant)
	}
	return nil
}

func validLevel(l string) bool { _, ok := levelRank[l]; return ok }

// endpointFields validates the scalar fields a create or update sets.
func endpointFields(displayName, template, dedupeHeader, level *string) error {
	if err := apierr.ValidText("displayName", ptrOr(displayName), maxDisplayName, false); err != nil {
		return err
	}
	if t := ptrOr(template); t != "" {
		if len(t) > maxTemplate {
			return apierr.Invalid("template", "at most %d bytes", maxTemplate)
		}
		if err := hooks.ValidateTemplate(t); err != nil {
			return engineInvalid("template", err)
		}
	}
	if h := ptrOr(dedupeHeader); h != "" && (len(h) > maxHeaderName || !httpguts.ValidHeaderFieldName(h)) {
		return apierr.Invalid("dedupeHeader", "must be an HTTP header name of at most %d bytes", maxHeaderName)
	}
	if level != nil && !validLevel(*level) {
		return apierr.Invalid("level", levelsWant)
	}
	return nil
}

func ptrOr(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// validDeliveryID checks a receipt id's shape (a UUID).
func validDeliveryID(id string) error {
	if id == "" || len(id) > 64 || strings.Trim(id, "0123456789abcdef-") != "" {
		return apierr.Invalid("id", "must be a delivery id")
	}
	return nil
}
