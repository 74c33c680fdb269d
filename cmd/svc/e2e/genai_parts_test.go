package e2e

// GenAI records are stored by content-addressed parts (docs/DECISIONS.md,
// "GenAI records stored by parts"); every read route answers them exactly
// as the upload answered, which is the record as parsed before storage.

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"svc/server/genai/genaitest"
)

// TestGenAISessionReadsBackWhole uploads the 25 calls of a Claude Code-like
// session (each repeating 69 KB of tools, the system prompt and every
// message so far) into an objective's holding, and reads every record back
// through the list, the record and the objective's trace, over REST and
// gRPC: each equals the record its upload answered.
func TestGenAISessionReadsBackWhole(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	admin := bearer(p.adminToken(t))
	uploads := genaitest.ClaudeSession(25)
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			t.Parallel()
			d := tr.connect(t, p)
			name := "session-" + tr.name
			tok := bearer(createMember(t, d, admin, name))
			o := mustCall(t, d, admin, "CreateObjective", obj{"title": "Session", "outcome": "stored whole", "assignee": name})

			want := map[string]obj{}
			var order []string
			for _, u := range uploads {
				// Without its ts the record is captured now, inside the
				// holding the objective opened.
				i := bytes.IndexByte(u, ',')
				require.Positive(t, i)
				rec := mustUploadGenAI(t, p, d, tok, name, append([]byte("{"), u[i+1:]...))
				want[rec["id"].(string)] = rec
				order = append(order, rec["id"].(string))
			}

			list := listGenAI(t, d, tok, name, obj{})
			require.Equal(t, order, genaiIDs(list))
			for _, rec := range list {
				require.Equal(t, want[rec["id"].(string)], rec, "the list answers the record as uploaded")
			}
			for _, id := range order {
				got := mustCall(t, d, admin, "GetGenAi", obj{"name": name, "id": id})
				require.Equal(t, want[id], got["inference"], "the record answers as uploaded")
			}
			tr := mustCall(t, d, admin, "GetObjectiveTrace", obj{"id": o["id"]})
			seen := 0
			for _, row := range listOf(t, tr, "rows") {
				inf, ok := row["inference"].(obj)
				if !ok {
					continue
				}
				require.Equal(t, want[inf["id"].(string)], inf, "the trace answers the record as uploaded")
				seen++
			}
			require.Equal(t, len(uploads), seen, "every call is in the trace")
		})
	}
}
