package e2e

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"svc/cmd/svc/internal/browsertest"
)

// An approval decided in the browser: the agent's request shows as a card
// in alice's DM with it, with a badge on Team; alice denies it with a
// reason, and allows the next from the Team page. The agent's input is
// shown as text; a card another member forges in a DM shows nothing of the
// approval it names.
func TestWebUIApprovals(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	admin := bearer(p.adminToken(t))
	d := restDriver{p}
	agent := bearer(createMember(t, d, admin, "agent"))
	mallory := bearer(createMember(t, d, admin, "mallory"))
	createMember(t, d, admin, "alice")
	mustCall(t, d, admin, "SetApprovers", obj{"name": "agent", "approvers": []string{"alice"}})
	alice := enroll(t, d, admin, "alice")

	b := browsertest.Launch(t)
	pg := b.NewPage("alice")
	uiSignIn(t, pg, p.base, alice)
	waitLive(t, pg)
	openConv(t, pg, "dm:agent")

	first := mustCall(t, d, agent, "CreateApproval", obj{"tool": "Write", "input": obj{"file_path": "/srv/" + xssPayload, "content": "x"}})["id"].(string)
	card := `.approval-card[data-approval="` + first + `"]`
	pg.WaitJS(t, "the card in the DM", `document.querySelector(`+js(card+` .approval-title`)+`)?.textContent === 'agent asks to use Write'`, uiWait)
	pg.WaitJS(t, "the Team badge", `document.getElementById('approvals-badge')?.textContent === '1' && !document.getElementById('approvals-badge').hidden`, uiWait)
	require.Contains(t, browsertest.Eval[string](t, pg, "input", `document.querySelector(`+js(card+` .approval-input`)+`).textContent`), "<script>window.__xss=2</script>", "the input is shown as text (JSON)")
	requireInert(t, pg, ".approval-card")
	if dir := os.Getenv("SVC_WEBUI_SHOTS"); dir != "" {
		pg.SaveScreenshot(t, dir+"/approvals-dm.png")
	}

	setInput(t, pg, card+" .approval-reason", "not that path")
	clickButton(t, pg, card, "Deny")
	pg.WaitJS(t, "denied", `document.querySelector(`+js(card+` .approval-status`)+`)?.textContent.startsWith('Denied by alice: not that path')`, uiWait)
	pg.WaitJS(t, "no badge", `document.getElementById('approvals-badge')?.hidden`, uiWait)
	require.Zero(t, browsertest.Eval[int](t, pg, "buttons", `document.querySelectorAll(`+js(card+` button`)+`).length`), "a decided card offers nothing")
	got := mustCall(t, d, admin, "GetApproval", obj{"id": first})
	require.Equal(t, "denied", got["status"])
	require.Equal(t, "alice", got["decidedBy"])
	require.Equal(t, "not that path", got["reason"])

	// A forged request from another member shows nothing of the approval
	// it names, and no buttons.
	mustPush(t, d, mallory, obj{"to": "alice", "body": "please approve", "data": obj{"kind": "approval_request", "approval": first}})
	openConv(t, pg, "dm:mallory")
	pg.WaitJS(t, "the forged card", `document.querySelector('.approval-card')?.textContent.includes('did not ask for')`, uiWait)
	require.Zero(t, browsertest.Eval[int](t, pg, "forged buttons", `document.querySelectorAll('.approval-card button').length`))

	// From the Team page: the next request, allowed.
	second := mustCall(t, d, agent, "CreateApproval", obj{"tool": "Bash", "input": obj{"command": "make deploy"}})["id"].(string)
	pg.WaitJS(t, "the badge again", `document.getElementById('approvals-badge')?.textContent === '1' && !document.getElementById('approvals-badge').hidden`, uiWait)
	pg.Click(t, "open Team", `nav a[href="/ui/team"]`)
	card2 := `#approvals .approval-card[data-approval="` + second + `"]`
	pg.WaitJS(t, "the card on Team", `document.querySelector(`+js(card2+` .approval-title`)+`)?.textContent === 'agent asks to use Bash'`, uiWait)
	clickButton(t, pg, card2, "Allow")
	pg.WaitJS(t, "allowed", `document.querySelector(`+js(card2+` .approval-status`)+`)?.textContent.startsWith('Allowed by alice')`, uiWait)
	pg.WaitJS(t, "no badge", `document.getElementById('approvals-badge')?.hidden`, uiWait)
	require.Equal(t, "allowed", mustCall(t, d, admin, "GetApproval", obj{"id": second})["status"])
	// The decided card stays on the page with its decision.
	pg.WaitJS(t, "the list redrawn", `document.querySelector('.approvals-slot')?.dataset.waiting === '0'`, uiWait)
	require.True(t, browsertest.Eval[bool](t, pg, "still shown", `document.querySelector(`+js(card2+` .approval-status`)+`)?.textContent.startsWith('Allowed by alice')`))
	noExceptions(t, pg)
	if dir := os.Getenv("SVC_WEBUI_SHOTS"); dir != "" {
		pg.SaveScreenshot(t, dir+"/approvals-team.png")
	}
}
