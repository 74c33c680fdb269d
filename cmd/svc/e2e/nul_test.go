package e2e

// NUL (U+0000) from outside on both stores (docs/DECISIONS.md, "Text
// fields hold no NUL"): PostgreSQL's text cannot hold one, so where svc
// keeps it is decided per field, and these tests hold on SQLite and on
// PostgreSQL (SVC_E2E_STORE=postgres) alike.

import (
	"encoding/base64"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// An OTLP export carrying NUL in its strings (an attribute, a model name,
// a request and a response body) is taken whole on every transport: each
// NUL is stored as U+FFFD, and the member's usage still reads.
func TestOTLPNULReplaced(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	admin := bearer(p.adminToken(t))
	const model = "claude-nul\x00x"
	for _, tr := range otTransports {
		member := "nul-" + tr.name
		tok := createMember(t, restDriver{p}, admin, member)
		t.Run(tr.name, func(t *testing.T) {
			at := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
			u := otUsage{in: 3, out: 4, cost: 0.02, durationMs: 5}
			body := otReqBody(at, "sess-nul", 0, model, otAnthropicRequest(t, model, nil, []obj{{"role": "user", "content": "say\x00hi"}}))
			body.attrs = append(body.attrs, otStr("odd\x00key", "v\x00"))
			req := otLogsReq(otNamings[3], body,
				otAcct(at, "sess-nul", 1, model, "req_nul", u),
				otRespBody(at, "sess-nul", 2, model, "req_nul", otAnthropicResponse(t, model, "msg_nul", []obj{{"type": "text", "text": "an\x00swer"}}, "end_turn", u)))
			require.Zero(t, tr.export(t, p, tok, req), "no record is refused")
			// The usage reads every exchange's data as JSON (jsonb on
			// PostgreSQL, which refuses the \u0000 escape).
			r := p.do(t, http.MethodGet, "/members/"+member+"/usage", nil, withBearer(tok))
			require.Equal(t, http.StatusOK, r.status, "usage: %s", r.raw)
			require.Contains(t, string(r.raw), "claude-nul\uFFFDx")

			rows, raw := otRows(t, p, tok, member)
			require.NotContains(t, string(raw), `\u0000`)
			row := otExchangeBy(t, otExchanges(t, p, tok, member), "req_nul")
			d := otData(t, row)
			require.Equal(t, "claude-nul\uFFFDx", d["model"])
			require.Contains(t, otJSON(t, d["messages"]), "say\uFFFDhi")
			require.Contains(t, otJSON(t, d["content"]), "an\uFFFDswer")
			require.NotEmpty(t, rows)
		})
	}
}

// A webhook body holding NUL is stored exactly as it came (its bytes are
// what its signature covers, and a replay runs them again) and delivered
// with each NUL shown as U+FFFD in the message, JSON or not.
func TestE2EHookBodyWithNUL(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	d := restDriver{p}
	ac := bearer(p.adminToken(t))
	ch := mustCall(t, d, ac, "CreateChannel", obj{"slug": "ops"})
	mustCall(t, d, ac, "CreateNotificationEndpoint", obj{
		"slug": "nul", "targets": []any{obj{"channel": "ops"}}, "auth": obj{"kind": "hmac-sha256"},
	})
	mustCall(t, d, ac, "CreateNotificationEndpoint", obj{
		"slug": "nultpl", "targets": []any{obj{"channel": "ops"}}, "auth": obj{"kind": "hmac-sha256"},
		"template": "action: {{payload.action}}",
	})
	secret := hookSecret(t)
	mustCall(t, d, ac, "SetNotificationEndpointSecret", obj{"slug": "nul", "secret": secret})
	mustCall(t, d, ac, "SetNotificationEndpointSecret", obj{"slug": "nultpl", "secret": secret})

	for _, tt := range []struct {
		name, slug string
		body       []byte
		shown      string
	}{
		{"JSON with an escaped NUL", "nul", []byte(`{"action":"op\u0000ened"}`), `op\u0000ened`},
		{"JSON through a template", "nultpl", []byte(`{"action":"op\u0000ened"}`), "action: op\uFFFDened"},
		{"bytes with a raw NUL", "nul", []byte("plain\x00text"), "plain\uFFFDtext"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := p.do(t, http.MethodPost, "/hooks/"+tt.slug, tt.body, withHeader("X-Hub-Signature-256", sign(secret, tt.body)))
			require.Equal(t, http.StatusAccepted, r.status, string(r.raw))
			require.Equal(t, "delivered", r.body["status"])
			id := r.body["id"].(string)
			rec := mustCall(t, d, ac, "GetNotificationDelivery", obj{"id": id})
			require.Equal(t, base64.StdEncoding.EncodeToString(tt.body), rec["body"], "the body is kept byte for byte")
			ids := strs(t, rec["messageIds"])
			require.Len(t, ids, 1)
			var msg obj
			for _, m := range listOf(t, mustCall(t, d, ac, "History", obj{"channel": ch["id"]}), "messages") {
				if m["id"] == ids[0] {
					msg = m
				}
			}
			require.NotNil(t, msg, "the delivered message is in the channel")
			text := msg["body"].(string)
			require.NotContains(t, text, "\x00")
			require.Contains(t, text, tt.shown)

			rep := mustCall(t, d, ac, "ReplayNotificationDelivery", obj{"id": id})
			require.Equal(t, "delivered", rep["status"], "the stored body replays")
		})
	}
}
