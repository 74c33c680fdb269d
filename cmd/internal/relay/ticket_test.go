package relay

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const testToken = "svc_TicketTestToken0123456789abcdef"

func redeemCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestTicketRedeemsOnce(t *testing.T) {
	s, err := Listen("", nil)
	require.NoError(t, err)
	defer s.Close()
	var refused atomic.Int32
	s.OnRefusedTicket(func() { refused.Add(1) })
	tk, err := s.IssueTicket(testToken)
	require.NoError(t, err)
	require.Len(t, tk.Value(), 2*ticketBytes)
	require.NotContains(t, tk.Value(), "svc_")

	got, err := Redeem(redeemCtx(t), s.Path(), tk.Value())
	require.NoError(t, err)
	require.Equal(t, testToken, got)
	select {
	case <-tk.Done():
	default:
		t.Fatal("Done not closed by the redemption")
	}
	require.True(t, tk.Redeemed())

	// The same ticket again: whoever read it from the toolbox's
	// environment or config after the toolbox started gets nothing.
	_, err = Redeem(redeemCtx(t), s.Path(), tk.Value())
	require.ErrorIs(t, err, ErrTicketRefused)
	require.Equal(t, int32(1), refused.Load())
	require.False(t, tk.Void(), "spent already")
}

func TestTicketRefusals(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ticket func(s *Server, tk *Ticket) string
	}{
		{"unknown", func(*Server, *Ticket) string { return strings.Repeat("ab", ticketBytes) }},
		{"prefix of the ticket", func(_ *Server, tk *Ticket) string { return tk.Value()[:len(tk.Value())-1] }},
		{"ticket and more", func(_ *Server, tk *Ticket) string { return tk.Value() + "0" }},
		{"upper case", func(_ *Server, tk *Ticket) string { return strings.ToUpper(tk.Value()) }},
		{"voided", func(_ *Server, tk *Ticket) string { tk.Void(); return tk.Value() }},
		{"the token itself", func(*Server, *Ticket) string { return testToken }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Listen("", nil)
			require.NoError(t, err)
			defer s.Close()
			var refused atomic.Int32
			s.OnRefusedTicket(func() { refused.Add(1) })
			tk, err := s.IssueTicket(testToken)
			require.NoError(t, err)
			_, err = Redeem(redeemCtx(t), s.Path(), tc.ticket(s, tk))
			require.ErrorIs(t, err, ErrTicketRefused)
			require.Equal(t, int32(1), refused.Load())
			require.False(t, tk.Redeemed())
		})
	}
}

func TestTicketVoidedByClose(t *testing.T) {
	s, err := Listen("", nil)
	require.NoError(t, err)
	tk, err := s.IssueTicket(testToken)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	select {
	case <-tk.Done():
	default:
		t.Fatal("an open ticket outlived the runner's socket")
	}
	require.False(t, tk.Redeemed())
}

// TestTicketRaceHasOneWinner: of many processes presenting the same ticket
// at once, exactly one gets the credential.
func TestTicketRaceHasOneWinner(t *testing.T) {
	s, err := Listen("", nil)
	require.NoError(t, err)
	defer s.Close()
	tk, err := s.IssueTicket(testToken)
	require.NoError(t, err)
	const n = 16
	results := make(chan error, n)
	for range n {
		go func() {
			_, err := Redeem(redeemCtx(t), s.Path(), tk.Value())
			results <- err
		}()
	}
	won := 0
	for range n {
		if err := <-results; err == nil {
			won++
		} else {
			require.ErrorIs(t, err, ErrTicketRefused)
		}
	}
	require.Equal(t, 1, won)
}

// rawHello sends one line to the socket and returns the answer line ("" if
// the runner closed without one).
func rawHello(t testing.TB, path string, line []byte) string {
	c, err := net.Dial("unix", path)
	require.NoError(t, err)
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	_, _ = c.Write(append(line, '\n'))
	ans, _ := bufio.NewReader(c).ReadString('\n')
	return ans
}

// FuzzHello: whatever line a process sends, the runner answers with the
// token only for a credential hello carrying the open ticket, and only
// the first time.
func FuzzHello(f *testing.F) {
	f.Add([]byte(`{"role":"credential","ticket":"TICKET"}`))
	f.Add([]byte(`{"role":"credential","ticket":"TICKET","role":"events"}`))
	f.Add([]byte(`{"role":"credential"}`))
	f.Add([]byte(`{"role":"hook","payload":{"hook_event_name":"Stop"},"ticket":"TICKET"}`))
	f.Add([]byte(`{"role":"credential","ticket":["TICKET"]}`))
	f.Add([]byte(`{"role":"Credential","ticket":"TICKET"}`))
	f.Add([]byte("\x00\xff"))
	s, err := Listen("", func(json.RawMessage) {})
	require.NoError(f, err)
	f.Cleanup(func() { s.Close() })
	f.Fuzz(func(t *testing.T, line []byte) {
		if len(line) > 4096 || strings.ContainsAny(string(line), "\r\n") {
			return
		}
		tk, err := s.IssueTicket(testToken)
		require.NoError(t, err)
		defer tk.Void()
		line = []byte(strings.ReplaceAll(string(line), "TICKET", tk.Value()))
		var h hello
		decoded := json.Unmarshal(line, &h) == nil
		if decoded && h.Role == "events" {
			return // a subscription: it stays open and answers nothing
		}
		valid := decoded && h.Role == "credential" && h.Ticket == tk.Value()
		ans := rawHello(t, s.Path(), line)
		require.Equal(t, valid, strings.Contains(ans, testToken), "line %q answered %q", line, ans)
		if valid {
			require.NotContains(t, rawHello(t, s.Path(), line), testToken, "a second time")
		}
	})
}
