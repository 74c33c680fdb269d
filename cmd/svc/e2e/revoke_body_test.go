package e2e

import (
	"bufio"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRevokeDuringBodyIsHonoured: the gateway authenticates a REST call
// before it reads the body (so a caller without credentials is refused at
// once), but a body may take minutes to arrive (withBodyGuard lets 1 MiB
// take 17). A token revoked while its request's body is still arriving
// must not be honoured once the body is in: revocation is effective
// immediately (core.md, DELETE /members/:name/tokens/:id), and the same
// holds for a rotated token, a deleted member or a changed permission set.
func TestRevokeDuringBodyIsHonoured(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	admin := bearer(p.adminToken(t))
	d := restDriver{p}
	bob := createMember(t, d, admin, "bob")
	requireWorks(t, d, bearer(bob), "bob")

	conn, err := net.Dial("tcp", p.addr)
	require.NoError(t, err)
	defer conn.Close()
	body := `{"to": "bob", "body": "sent after the revoke"}`
	head := "POST /push HTTP/1.1\r\nHost: " + p.addr + "\r\nAuthorization: Bearer " + bob +
		"\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n"
	_, err = conn.Write([]byte(head + body[:5]))
	require.NoError(t, err)
	time.Sleep(300 * time.Millisecond) // the gateway has authenticated and is reading the body

	r := p.do(t, http.MethodPost, "/members/bob/rotate-token", nil, withAuthorization(admin.authorization))
	require.Equal(t, http.StatusOK, r.status, "rotate: %s", r.raw)
	requireRejected(t, d, bearer(bob))

	_, err = conn.Write([]byte(body[5:]))
	require.NoError(t, err)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(callTimeout)))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "a push with a token revoked before its body ended was accepted")
}
