package webpush

import (
	"bytes"
	"context"
	"crypto/ecdh"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	webpushgo "github.com/SherClockHolmes/webpush-go"
)

// Sizes of the aes128gcm encoding (RFC 8188 §2, RFC 8291 §4) that bound the payload.
const (
	// recordSize is the record size the library declares and pads every message to.
	recordSize = int(webpushgo.MaxRecordSize)
	// headerLen is salt (16) + rs (4) + idlen (1) + keyid, the 65-byte ephemeral public key.
	headerLen = 16 + 4 + 1 + 65
	// tagLen is the AES-GCM authentication tag.
	tagLen = 16
	// delimiterLen is the 0x02 padding delimiter of the last (and only) record.
	delimiterLen = 1
)

// MaxPayload is the largest plaintext that fits one 4096-byte aes128gcm message (3993 bytes, RFC 8291 §4).
const MaxPayload = recordSize - headerLen - tagLen - delimiterLen

// DefaultTTL is how long the push service keeps an undelivered message; a day covers a laptop that sleeps overnight.
const DefaultTTL = 24 * time.Hour

// defaultTimeout bounds one request to a push service so a slow one cannot pile up senders.
const defaultTimeout = 10 * time.Second

// maxEndpointLen is the longest subscription endpoint accepted (docs/DECISIONS.md, Browser push).
const maxEndpointLen = 2048

// ErrPayloadTooLarge is returned by Send for payloads longer than MaxPayload.
var ErrPayloadTooLarge = errors.New("webpush: payload too large")

// Subscription is a browser's PushSubscription. P256dh and Auth are base64url as browsers send them;
// padding and the standard alphabet are tolerated, as the underlying library does.
type Subscription struct {
	Endpoint string
	P256dh   string
	Auth     string
}

// Result is the push service's answer to one Send.
type Result struct {
	// Status is the HTTP status code of the push service.
	Status int
	// Gone reports a 404 or 410: the subscription has expired and should be removed.
	Gone bool
}

// StatusError is returned by Send when the push service answers a status that is neither 2xx, 404 nor 410.
type StatusError struct {
	Code int
}

// Error implements error.
func (e *StatusError) Error() string {
	return fmt.Sprintf("webpush: push service answered %d %s", e.Code, http.StatusText(e.Code))
}

// EndpointHost is the host of a subscription endpoint, the one part of it
// that may be logged: the path identifies (and authorizes pushes to) one
// browser.
func EndpointHost(endpoint string) string {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return "(unparsable endpoint)"
	}
	return u.Host
}

// Sender encrypts and delivers push messages signed with one VAPID key pair. It is safe for concurrent use.
type Sender struct {
	publicKey  string
	privateKey string
	subject    string
	client     *http.Client
	ttl        time.Duration
}

// Option configures a Sender.
type Option func(*Sender)

// WithHTTPClient sets the client used to reach push services; nil keeps the default.
func WithHTTPClient(c *http.Client) Option {
	return func(s *Sender) {
		if c != nil {
			s.client = c
		}
	}
}

// WithTTL sets the TTL header, rounded down to whole seconds; negative values count as zero.
func WithTTL(d time.Duration) Option {
	return func(s *Sender) { s.ttl = max(d, 0) }
}

// New returns a Sender for the VAPID key pair, given as unpadded base64url: publicKey a 65-byte
// uncompressed P-256 point and privateKey its 32-byte scalar. subject is the mailto: or https: contact
// put in the VAPID "sub" claim.
func New(publicKey, privateKey, subject string, opts ...Option) (*Sender, error) {
	pub, err := base64.RawURLEncoding.Strict().DecodeString(publicKey)
	if err != nil || len(pub) != 65 {
		return nil, errors.New("webpush: vapid public key must be 65 bytes of unpadded base64url")
	}
	priv, err := base64.RawURLEncoding.Strict().DecodeString(privateKey)
	if err != nil || len(priv) != 32 {
		return nil, errors.New("webpush: vapid private key must be 32 bytes of unpadded base64url")
	}
	key, err := ecdh.P256().NewPrivateKey(priv)
	if err != nil {
		return nil, fmt.Errorf("webpush: vapid private key: %w", err)
	}
	if !bytes.Equal(key.PublicKey().Bytes(), pub) {
		return nil, errors.New("webpush: vapid public key does not match the private key")
	}
	// The library prefixes "mailto:" to every subject not starting with "https:", so a full
	// mailto: URI would become "mailto:mailto:…", which Apple rejects (webpush-go PR #92).
	var libSubject string
	switch {
	case strings.HasPrefix(subject, "mailto:") && len(subject) > len("mailto:"):
		libSubject = strings.TrimPrefix(subject, "mailto:")
	case strings.HasPrefix(subject, "https://") && len(subject) > len("https://"):
		libSubject = subject
	default:
		return nil, errors.New("webpush: vapid subject must be a mailto: or https: URI")
	}
	s := &Sender{
		publicKey:  publicKey,
		privateKey: privateKey,
		subject:    libSubject,
		ttl:        DefaultTTL,
		client: &http.Client{
			Timeout: defaultTimeout,
			// A push service redirect is unexpected; following it would post the message elsewhere.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}
	for _, o := range opts {
		o(s)
	}
	return s, nil
}

// Send encrypts payload for sub and posts it to the subscription's push service. A 404 or 410 answer
// is not an error: it returns Gone. Other non-2xx answers return a *StatusError.
func (s *Sender) Send(ctx context.Context, sub Subscription, payload []byte) (Result, error) {
	if len(payload) > MaxPayload {
		return Result{}, fmt.Errorf("%w: %d bytes, at most %d", ErrPayloadTooLarge, len(payload), MaxPayload)
	}
	if err := checkKeys(sub.P256dh, sub.Auth, decodeLenient); err != nil {
		return Result{}, err
	}
	resp, err := webpushgo.SendNotificationWithContext(ctx, payload, &webpushgo.Subscription{
		Endpoint: sub.Endpoint,
		Keys:     webpushgo.Keys{P256dh: sub.P256dh, Auth: sub.Auth},
	}, &webpushgo.Options{
		HTTPClient:      s.client,
		Subscriber:      s.subject,
		TTL:             int(s.ttl / time.Second),
		VAPIDPublicKey:  s.publicKey,
		VAPIDPrivateKey: s.privateKey,
	})
	if err != nil {
		// A subscription's endpoint URL is a bearer-like secret: an error
		// names its host only, never the URL net/http puts in its errors.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = fmt.Errorf("%s %s: %w", ue.Op, EndpointHost(sub.Endpoint), ue.Err)
		}
		return Result{}, fmt.Errorf("webpush: send: %w", err)
	}
	defer resp.Body.Close()
	// Drain a little so the connection can be reused; push service bodies are short diagnostics.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))

	res := Result{Status: resp.StatusCode}
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return res, nil
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone:
		res.Gone = true
		return res, nil
	default:
		return res, &StatusError{Code: resp.StatusCode}
	}
}
