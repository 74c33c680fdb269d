package cluster

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// Signed messages (docs/DECISIONS.md, "Signed NATS messages"). NATS is
// only as private as its account: anyone who can publish on a team's
// subjects could hand every broker forged records. A Signer holds a key
// only the team's brokers have (derived from the KEK they share) and puts
// an HMAC-SHA256 of the subject and the payload in a header, so a receiver
// can tell its peers' messages from anyone else's and trust what they
// carry.

// SignerLabel is the KEK derivation label of the signing key.
const SignerLabel = "svc-nats-envelope-v1"

// macHeader is the header that carries the signature.
const macHeader = "Svc-Mac"

// Signer signs and checks NATS messages with one key. A nil Signer signs
// nothing and trusts nothing.
type Signer struct{ key []byte }

// NewSigner returns a signer with key (at least 32 bytes).
func NewSigner(key []byte) *Signer {
	if len(key) < sha256.Size {
		panic("cluster: a signing key needs at least 32 bytes")
	}
	return &Signer{key: key}
}

// mac is HMAC-SHA256 over the subject, a zero byte and the payload: a
// message signed for one subject (one team's chat, say) is no good on
// another (its activity, or another team's).
func (s *Signer) mac(subject string, data []byte) []byte {
	h := hmac.New(sha256.New, s.key)
	h.Write([]byte(subject))
	h.Write([]byte{0})
	h.Write(data)
	return h.Sum(nil)
}

// Msg returns a message of data on subject, signed unless s is nil.
func (s *Signer) Msg(subject string, data []byte) *nats.Msg {
	m := nats.NewMsg(subject)
	m.Data = data
	if s != nil {
		m.Header.Set(macHeader, base64.RawStdEncoding.EncodeToString(s.mac(subject, data)))
	}
	return m
}

// Verdict is what a receiver knows of a message's origin.
type Verdict int

const (
	// Unsigned: the message carries no signature, or this broker has no
	// key to check one with.
	Unsigned Verdict = iota
	// Signed: the signature is good, so one of the team's brokers sent
	// this payload on this subject.
	Signed
	// Forged: the message carries a signature that is not good.
	Forged
)

// Check says whether m was signed by a holder of s's key.
func (s *Signer) Check(m *nats.Msg) Verdict {
	var got string
	if m.Header != nil {
		got = m.Header.Get(macHeader)
	}
	if s == nil || got == "" {
		return Unsigned
	}
	sum, err := base64.RawStdEncoding.DecodeString(got)
	if err != nil || !hmac.Equal(sum, s.mac(m.Subject, m.Data)) {
		return Forged
	}
	return Signed
}

// Replays tells a sender's new messages from old ones sent again: on the
// subjects whose messages are not committed records with ids (presence,
// the team stream), a signature alone would let anyone who can subscribe
// replay a broker's old message, say a member's stream that has since
// closed. Each message carries its sender's count (ascending from 1 per
// sender) and the time it was sent; a message is taken only if it is
// later than the last taken from its sender and was sent within the
// window of the receiver's clock. A sender is remembered for a window
// after its last message: anything older is refused by its time anyway.
type Replays struct {
	window time.Duration
	mu     sync.Mutex
	last   map[string]lastSeen
}

type lastSeen struct {
	n     int64
	heard time.Time
}

// maxSenders bounds the senders Replays remembers: a team runs a handful
// of brokers, and only those that sign (or, without a key, anyone who
// can publish) make one.
const maxSenders = 1024

// Why a message was refused.
var (
	ErrStale  = errors.New("sent too long ago or too far ahead of this clock")
	ErrReplay = errors.New("not later than the last message of its sender")
)

// NewReplays returns a guard with window (the clock skew brokers may
// have, and the oldest message still taken).
func NewReplays(window time.Duration) *Replays {
	return &Replays{window: window, last: map[string]lastSeen{}}
}

// Take reports whether sender's message n, sent at, is new at now, and
// records it if so.
func (r *Replays) Take(sender string, n int64, at, now time.Time) error {
	if d := now.Sub(at); d > r.window || d < -r.window {
		return ErrStale
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if l, ok := r.last[sender]; ok && n <= l.n {
		return ErrReplay
	}
	if len(r.last) >= maxSenders {
		for s, l := range r.last {
			if now.Sub(l.heard) > r.window {
				delete(r.last, s)
			}
		}
		if len(r.last) >= maxSenders {
			return ErrReplay // a flood of senders: the quietest real one is back after the window
		}
	}
	r.last[sender] = lastSeen{n: n, heard: now}
	return nil
}
