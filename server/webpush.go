package server

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"svc/server/apierr"
	"svc/server/wire"
	"sync"
	"time"

	apiv1 "svc/gen/svc/v1"
	"svc/server/egress"
	"svc/server/kek"
	"svc/server/teamconfig"
	"svc/server/webpush"
	"svc/store"
)

// maxPushSubscriptions bounds one member's subscriptions: each DM costs a
// request per subscription.
const maxPushSubscriptions = 10

// pushWorkers is how many pushes are sent at once.
const pushWorkers = 4

// pushTimeout bounds one request to a push service.
const pushTimeout = 10 * time.Second

// pushQueue bounds the browser pushes waiting for a worker; past it a push
// is dropped with a warning (the message itself is committed and in
// history either way).
const pushQueue = 1024

// pushNotifier sends DMs and objective-thread messages to the browsers of
// members who have no live stream.
type pushNotifier struct {
	store     store.PushSubscriptionStore
	team      *Team
	kek       *kek.KEK
	subject   string
	allowHTTP bool
	egress    egress.Policy
	log       *slog.Logger
	jobs      chan pushJob
	// met, when set, counts send results.
	met *metrics

	once   sync.Once
	sender *webpush.Sender // nil when web push is disabled

	mu sync.Mutex
	// subscribed counts subscriptions per member, so the committer only
	// queues pushes that can go somewhere.
	subscribed map[string]int
}

type pushJob struct {
	member  string
	payload []byte
}

func newPushNotifier(st store.PushSubscriptionStore, team *Team, k *kek.KEK, subject string, allowHTTP bool, policy egress.Policy, log *slog.Logger) *pushNotifier {
	switch {
	case subject == "":
		subject = "mailto:svc@localhost"
	case !strings.HasPrefix(subject, "mailto:") && !strings.HasPrefix(subject, "https://") && strings.Contains(subject, "@"):
		// An operator's plain address; VAPID wants a mailto: URL.
		subject = "mailto:" + subject
	}
	return &pushNotifier{
		store: st, team: team, kek: k, subject: subject, allowHTTP: allowHTTP, egress: policy, log: log,
		jobs: make(chan pushJob, pushQueue), subscribed: map[string]int{},
	}
}

// senderOrNil builds the sender from the config's webPush block once.
func (n *pushNotifier) senderOrNil() *webpush.Sender {
	n.once.Do(func() {
		w := n.team.WebPush()
		if w == nil {
			return
		}
		priv, err := teamconfig.OpenVAPID(n.kek, w)
		if err != nil {
			n.log.Warn("web push disabled: VAPID private key unreadable", "err", err)
			return
		}
		// A subscription's endpoint is chosen by a member: the egress
		// client keeps pushes off internal addresses, unless local
		// endpoints are allowed (a local push relay, tests).
		policy := n.egress
		if n.allowHTTP {
			policy = egress.AllowAll
		}
		client := egress.NewClient(egress.Options{Policy: policy, Timeout: pushTimeout, MaxIdleConnsPerHost: 4})
		if n.sender, err = webpush.New(w.VAPIDPublicKey, priv, n.subject, webpush.WithHTTPClient(client)); err != nil {
			n.log.Warn("web push disabled: bad VAPID keypair", "err", err)
		}
	})
	return n.sender
}

// run loads who has subscriptions, then sends queued pushes until ctx ends.
func (n *pushNotifier) run(ctx context.Context) {
	if n.senderOrNil() == nil {
		return
	}
	// Pushes are only queued for members counted here; if the listing
	// fails, new subscriptions still count and the queue is still drained.
	if subs, err := n.store.ListPushSubscriptions(ctx, ""); err != nil {
		n.log.Error("web push: cannot list subscriptions", "err", err)
	} else {
		n.mu.Lock()
		for _, s := range subs {
			n.subscribed[s.Member]++
		}
		n.mu.Unlock()
	}
	// A few workers, so one member's slow push services (up to 10
	// subscriptions × pushTimeout) cannot hold everyone else's pushes.
	var wg sync.WaitGroup
	for range pushWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-ctx.Done():
					return
				case j := <-n.jobs:
					n.deliver(ctx, j)
				}
			}
		}()
	}
	wg.Wait()
}

func (n *pushNotifier) deliver(ctx context.Context, j pushJob) {
	subs, err := n.store.ListPushSubscriptions(ctx, j.member)
	if err != nil {
		n.log.Warn("web push: list subscriptions", "member", j.member, "err", err)
		return
	}
	for _, s := range subs {
		res, err := n.sender.Send(ctx, webpush.Subscription{Endpoint: s.Endpoint, P256dh: s.P256dh, Auth: s.Auth}, j.payload)
		n.count(res.Gone, err)
		switch {
		case res.Gone:
			// Scoped to the member, as every subscription is.
			if err := n.store.DeletePushSubscription(ctx, s.Member, s.ID); err == nil {
				n.forget(s.Member)
				n.log.Info("web push subscription expired and removed", "member", s.Member, "host", webpush.EndpointHost(s.Endpoint), "status", res.Status)
			}
		case err != nil:
			n.log.Warn("web push failed", "member", s.Member, "host", webpush.EndpointHost(s.Endpoint), "err", err)
		}
	}
}

// count counts one send's result.
func (n *pushNotifier) count(gone bool, err error) {
	switch {
	case n.met == nil:
	case gone:
		n.met.pushGone.Inc()
	case err != nil:
		n.met.pushFailed.Inc()
	default:
		n.met.pushSent.Inc()
	}
}

func (n *pushNotifier) forget(member string) {
	n.mu.Lock()
	if n.subscribed[member]--; n.subscribed[member] <= 0 {
		delete(n.subscribed, member)
	}
	n.mu.Unlock()
}

// notify runs on the committer after a message is published: DMs and
// objective-thread messages go to targets with no live stream.
func (n *pushNotifier) notify(m store.Message, live func(string) bool) {
	if (m.To == "" && !strings.HasPrefix(m.Thread, "obj:")) || n.senderOrNil() == nil {
		return
	}
	var payload []byte
	for _, r := range m.Recipients {
		n.mu.Lock()
		has := n.subscribed[r] > 0
		n.mu.Unlock()
		if !has || live(r) {
			continue
		}
		if payload == nil {
			payload = pushPayload(m)
		}
		select {
		case n.jobs <- pushJob{member: r, payload: payload}:
		default:
			n.log.Warn("web push queue full; push dropped", "member", r, "message", formatMessageID(m.Seq))
		}
	}
}

// pushPayload is what a browser's service worker gets: the message id,
// sender, title, body and thread, with the body cut to fit one record.
func pushPayload(m store.Message) []byte {
	p := struct {
		ID     string `json:"id"`
		From   string `json:"from"`
		Title  string `json:"title"`
		Body   string `json:"body"`
		Thread string `json:"thread"`
	}{formatMessageID(m.Seq), m.From, m.Title, m.Body, m.Thread}
	for {
		b, err := json.Marshal(p)
		if err != nil {
			return nil
		}
		if len(b) <= webpush.MaxPayload || (p.Body == "" && p.Title == "") {
			return b
		}
		// Cut the longer of body and title, on rune boundaries.
		over := len(b) - webpush.MaxPayload
		if len(p.Body) >= len(p.Title) {
			p.Body = apierr.TruncateUTF8(p.Body, len(p.Body)-over-8)
		} else {
			p.Title = apierr.TruncateUTF8(p.Title, len(p.Title)-over-8)
		}
	}
}

func (n *pushNotifier) added(member string) {
	n.mu.Lock()
	n.subscribed[member]++
	n.mu.Unlock()
}

// brokerWebPush serves browser push: the VAPID key and subscriptions.
type brokerWebPush struct {
	*core
	push *pushNotifier
}

// GetVapidPublicKey implements apiv1.BrokerServer.
func (b *brokerWebPush) GetVapidPublicKey(context.Context, *apiv1.GetVapidPublicKeyRequest) (*apiv1.GetVapidPublicKeyResponse, error) {
	w := b.team.WebPush()
	if w == nil || w.VAPIDPublicKey == "" {
		return nil, apierr.Errorf(apierr.CodeNotFound, "web push is not configured")
	}
	return &apiv1.GetVapidPublicKeyResponse{PublicKey: w.VAPIDPublicKey}, nil
}

// CreatePushSubscription implements apiv1.BrokerServer.
func (b *brokerWebPush) CreatePushSubscription(ctx context.Context, req *apiv1.CreatePushSubscriptionRequest) (*apiv1.CreatePushSubscriptionResponse, error) {
	p := mustPrincipal(ctx)
	if b.team.WebPush() == nil {
		return nil, apierr.Errorf(apierr.CodeNotFound, "web push is not configured")
	}
	if err := webpush.ValidateEndpoint(req.GetEndpoint(), b.push.allowHTTP); err != nil {
		return nil, apierr.Invalid("endpoint", "%v", err)
	}
	if err := webpush.ValidateKeys(req.GetKeys().GetP256Dh(), req.GetKeys().GetAuth()); err != nil {
		return nil, apierr.Invalid("keys", "%v", err)
	}
	prev, err := b.store.ListPushSubscriptions(ctx, p.Member)
	if err != nil {
		return nil, err
	}
	known := slices.ContainsFunc(prev, func(o store.PushSubscription) bool { return o.Endpoint == req.GetEndpoint() })
	if len(prev) >= maxPushSubscriptions && !known {
		return nil, apierr.Errorf(apierr.CodeConflict, "at most %d push subscriptions per member; delete one first", maxPushSubscriptions)
	}
	s, err := b.store.PutPushSubscription(ctx, store.PushSubscription{
		ID: newID(), Member: p.Member, Endpoint: req.GetEndpoint(),
		P256dh: req.GetKeys().GetP256Dh(), Auth: req.GetKeys().GetAuth(), CreatedAt: b.now(),
	})
	if errors.Is(err, store.ErrConflict) {
		s, err = b.takeOver(ctx, p.Member, req)
	}
	if err != nil {
		return nil, err
	}
	if !known {
		b.push.added(p.Member)
	}
	return &apiv1.CreatePushSubscriptionResponse{Subscription: &apiv1.PushSubscription{Id: s.ID, Endpoint: s.Endpoint, CreatedAt: wire.MS(s.CreatedAt)}}, nil
}

// takeOver moves another member's subscription of the same endpoint to
// member when the request carries the subscription's own keys: that proves
// it is the same browser subscription (a new member signed in on a shared
// browser), which must not go on showing the previous member's pushes.
// Knowing the endpoint alone (from a log, say) is not enough: another
// member posting it is 409, and the owner's notifications go on.
func (b *brokerWebPush) takeOver(ctx context.Context, member string, req *apiv1.CreatePushSubscriptionRequest) (store.PushSubscription, error) {
	cur, err := b.store.GetPushSubscriptionByEndpoint(ctx, req.GetEndpoint())
	if errors.Is(err, store.ErrNotFound) {
		// Deleted meanwhile: the endpoint is free.
		return b.store.PutPushSubscription(ctx, store.PushSubscription{
			ID: newID(), Member: member, Endpoint: req.GetEndpoint(),
			P256dh: req.GetKeys().GetP256Dh(), Auth: req.GetKeys().GetAuth(), CreatedAt: b.now(),
		})
	}
	if err != nil {
		return cur, err
	}
	same := subtle.ConstantTimeCompare([]byte(cur.P256dh), []byte(req.GetKeys().GetP256Dh())) &
		subtle.ConstantTimeCompare([]byte(cur.Auth), []byte(req.GetKeys().GetAuth()))
	if same != 1 {
		return cur, apierr.Errorf(apierr.CodeConflict, "this push endpoint is registered by another member")
	}
	moved, err := b.store.MovePushSubscription(ctx, req.GetEndpoint(), member)
	if err != nil {
		return moved, err
	}
	b.push.forget(cur.Member)
	b.log.InfoContext(ctx, "push subscription moved to the member now signed in on its browser", "from", cur.Member, "to", member)
	return moved, nil
}

// DeletePushSubscription implements apiv1.BrokerServer.
func (b *brokerWebPush) DeletePushSubscription(ctx context.Context, req *apiv1.DeletePushSubscriptionRequest) (*apiv1.DeletePushSubscriptionResponse, error) {
	p := mustPrincipal(ctx)
	err := b.store.DeletePushSubscription(ctx, p.Member, req.GetId())
	if errors.Is(err, store.ErrNotFound) {
		return nil, apierr.Errorf(apierr.CodeNotFound, "no push subscription %q", req.GetId())
	}
	if err != nil {
		return nil, err
	}
	b.push.forget(p.Member)
	setHTTPStatus(ctx, http.StatusNoContent)
	return &apiv1.DeletePushSubscriptionResponse{}, nil
}
