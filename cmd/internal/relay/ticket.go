package relay

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// TicketEnv names the toolbox's one-time ticket in its environment: the
// runner hands `svc mcp` a ticket, never its bearer, and gives the bearer
// only to the first process that presents the ticket on the socket
// (docs/RUNNER.md, "No credential within the agent's reach").
const TicketEnv = "SVC_RUNNER_TICKET"

// ticketBytes is a ticket's entropy: 256 bits, hex-encoded.
const ticketBytes = 32

// ErrTicketRefused is a ticket the runner does not hold: already redeemed,
// voided, or never issued.
var ErrTicketRefused = errors.New("relay: the runner refused the ticket (already used, or never issued)")

// Ticket is one credential the runner hands out once.
type Ticket struct {
	value string
	token string
	done  chan struct{}

	mu       sync.Mutex
	spent    bool // redeemed or voided
	redeemed bool
}

// Value is the ticket to give the toolbox (in TicketEnv).
func (t *Ticket) Value() string { return t.value }

// Done is closed once the ticket was redeemed or voided.
func (t *Ticket) Done() <-chan struct{} { return t.done }

// Redeemed says whether a process got the credential with the ticket.
func (t *Ticket) Redeemed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.redeemed
}

// Void makes the ticket worthless if it was not redeemed yet; it reports
// whether it was still open.
func (t *Ticket) Void() bool { return t.spend(false) }

func (t *Ticket) isSpent() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.spent
}

func (t *Ticket) spend(redeemed bool) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.spent {
		return false
	}
	t.spent, t.redeemed = true, redeemed
	close(t.done)
	return true
}

// IssueTicket returns a new ticket that redeems token once over the
// socket. The runner issues one per toolbox it starts.
func (s *Server) IssueTicket(token string) (*Ticket, error) {
	b := make([]byte, ticketBytes)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	t := &Ticket{value: hex.EncodeToString(b), token: token, done: make(chan struct{})}
	s.mu.Lock()
	defer s.mu.Unlock()
	open := s.tickets[:0]
	for _, o := range s.tickets {
		if !o.isSpent() {
			open = append(open, o)
		}
	}
	s.tickets = append(open, t)
	return t, nil
}

// OnRefusedTicket sets f to be told of each presented ticket the runner
// refused (spent, voided or unknown): someone other than the toolbox is
// trying, which the runner logs.
func (s *Server) OnRefusedTicket(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refused = f
}

// redeem hands out the token of the open ticket value names, once. Every
// open ticket is compared, each in constant time.
func (s *Server) redeem(value string) (string, bool) {
	s.mu.Lock()
	var match *Ticket
	for _, t := range s.tickets {
		if subtle.ConstantTimeCompare([]byte(t.value), []byte(value)) == 1 {
			match = t
		}
	}
	refused := s.refused
	s.mu.Unlock()
	if match != nil && match.spend(true) {
		return match.token, true
	}
	if refused != nil {
		refused()
	}
	return "", false
}

// credentialAnswer is the answer to a credential hello.
type credentialAnswer struct {
	Token string `json:"token,omitempty"`
	Error string `json:"error,omitempty"`
}

func (s *Server) serveCredential(c net.Conn, ticket string) {
	defer c.Close()
	var a credentialAnswer
	if tok, ok := s.redeem(ticket); ok {
		a.Token = tok
	} else {
		a.Error = "ticket refused"
	}
	line, _ := json.Marshal(a)
	_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	_, _ = c.Write(append(line, '\n'))
}

// Redeem presents ticket to the runner at path and returns the credential
// it stands for. It works once per ticket: ErrTicketRefused after that.
func Redeem(ctx context.Context, path, ticket string) (string, error) {
	if ticket == "" {
		return "", errors.New("relay: no ticket")
	}
	line, err := json.Marshal(hello{Role: "credential", Ticket: ticket})
	if err != nil {
		return "", err
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return "", err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	if _, err := c.Write(append(line, '\n')); err != nil {
		return "", err
	}
	ans, err := readLine(bufio.NewReaderSize(c, 8<<10))
	if err != nil {
		return "", fmt.Errorf("relay: no answer from the runner: %w", err)
	}
	var a credentialAnswer
	if json.Unmarshal(ans, &a) != nil {
		return "", errors.New("relay: the runner's answer is not JSON")
	}
	if a.Error != "" || a.Token == "" {
		return "", ErrTicketRefused
	}
	return a.Token, nil
}
