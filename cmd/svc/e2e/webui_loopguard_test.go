package e2e

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"svc/cmd/svc/internal/browsertest"
)

// In the web app, the message the loop guard stopped carries its label
// (from the broker's loopStopped, not from anything in data), and the
// notice opens a conversation of its own with no composer.
func TestWebUILoopGuard(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	admin := bearer(p.adminToken(t))
	d := restDriver{p}
	aliceTok := createMember(t, d, admin, "alice")
	agents := map[string]cred{"alpha": bearer(createMember(t, d, admin, "alpha")), "beta": bearer(createMember(t, d, admin, "beta"))}
	alice := enroll(t, d, admin, "alice")
	ch := mustCall(t, d, admin, "CreateChannel", obj{"slug": "ops"})["id"].(string)
	for _, m := range []string{"alice", "alpha", "beta"} {
		mustCall(t, d, admin, "AddChannelMember", obj{"channel": ch, "member": m})
	}
	for name, c := range agents {
		mustCall(t, d, c, "UpdateDelivery", obj{"name": name})
	}

	b := browsertest.Launch(t)
	pg := b.NewPage("alice")
	uiSignIn(t, pg, p.base, alice)
	waitLive(t, pg)
	openConv(t, pg, "chan:"+ch)

	post := func(c cred, body string, data obj) string {
		data["thread"] = "chan:" + ch
		return mustCall(t, d, c, "Push", obj{"body": body, "data": data})["message"].(obj)["id"].(string)
	}
	start := post(bearer(aliceTok), "alpha and beta, sort out the release", obj{"loopStopped": true})
	prev, from := start, "alpha"
	for hop := 1; hop <= 9; hop++ {
		turn(t, d, agents[from], from, prev, func() {
			prev = post(agents[from], fmt.Sprint("hop ", hop), obj{})
		})
		from = map[string]string{"alpha": "beta", "beta": "alpha"}[from]
	}
	waitShown(t, pg, "hop 9")
	labelled := browsertest.Eval[[]string](t, pg, "labelled messages",
		`[...document.querySelectorAll('ol.messages li.msg.loop-stopped')].map(li => li.querySelector('.body').textContent + ' | ' + li.querySelector('.loop-label').textContent)`)
	require.Equal(t, []string{"hop 9 | Stopped by the loop guard: agents kept replying to each other, so this message woke no agent"}, labelled,
		"only the message the broker stopped; alice's data.loopStopped is data")

	// The notice: alice is a person of the channel and started the chain.
	key := "loop:" + start
	pg.WaitJS(t, "the loop guard's conversation", `document.querySelector(`+js(convSel(key))+`) !== null`, uiWait)
	openConv(t, pg, key)
	pg.WaitJS(t, "the notice shown", `[...document.querySelectorAll('ol.messages li.msg .body')].some(e => e.textContent.startsWith('alpha, beta kept replying to each other'))`, uiWait)
	require.Equal(t, "Loop stopped ("+trimZeros(start)+")", browsertest.Eval[string](t, pg, "title", `document.querySelector('#conv-title').textContent`))
	require.True(t, browsertest.Eval[bool](t, pg, "no composer", `document.querySelector('form.composer').hidden`))
	require.Zero(t, browsertest.Eval[int](t, pg, "the notice has no stopped label", `document.querySelectorAll('li.msg.loop-stopped').length`))
	noExceptions(t, pg)
}

func trimZeros(id string) string {
	for len(id) > 1 && id[0] == '0' {
		id = id[1:]
	}
	return id
}
