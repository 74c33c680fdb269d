package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"svc/server/webpush/webpushtest"
)

// pushWait bounds the wait for an asynchronous browser push.
const pushWait = callTimeout

// subscribeBrowser registers sub as the caller's push subscription and
// returns its id.
func subscribeBrowser(t testing.TB, d driver, c cred, sub *webpushtest.Subscriber) string {
	t.Helper()
	s := mustCall(t, d, c, "CreatePushSubscription", obj{
		"endpoint": sub.Endpoint(),
		"keys":     obj{"p256dh": sub.P256dh(), "auth": sub.Auth()},
	})
	require.Equal(t, []string{"createdAt", "endpoint", "id"}, keys(s))
	require.Equal(t, sub.Endpoint(), s["endpoint"])
	require.InDelta(t, float64(time.Now().UnixMilli()), s["createdAt"], float64(time.Minute.Milliseconds()))
	id, _ := s["id"].(string)
	require.NotEmpty(t, id)
	return id
}

// waitPushes waits (bounded) until the fake service holds n requests.
func waitPushes(t testing.TB, svc *webpushtest.Service, n int) []webpushtest.Delivery {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), pushWait)
	defer cancel()
	got, err := svc.Wait(ctx, n)
	require.NoError(t, err, "got %d pushes: %+v", len(got), got)
	return got
}

// pushesTo counts the requests the fake service got for path.
func pushesTo(svc *webpushtest.Service, path string) int {
	n := 0
	for _, d := range svc.Received() {
		if d.Path == path {
			n++
		}
	}
	return n
}

func TestWebPush(t *testing.T) {
	t.Parallel()
	svc := webpushtest.NewService(t)
	cfgPath := filepath.Join(t.TempDir(), "svc.json")
	p := mustStartSvc(t, procOpts{configPath: cfgPath, env: []string{
		"SVC_WEBPUSH_ALLOW_HTTP=1", "SVC_WEBPUSH_SUBJECT=mailto:ops@example.com",
	}})
	admin := bearer(p.adminToken(t))
	d := restDriver{p}
	g := grpcDriver{p.grpcConn(t)}
	wp, ok := readJSON(t, cfgPath)["webPush"].(obj)
	require.True(t, ok, "first boot writes a webPush block")
	vapidKey, _ := wp["vapidPublicKey"].(string)
	require.NotEmpty(t, vapidKey)

	t.Run("vapid public key", func(t *testing.T) {
		r := p.do(t, http.MethodGet, "/push/vapid-public-key", nil)
		require.Equal(t, http.StatusOK, r.status, "no credential needed: %s", r.raw)
		require.Equal(t, obj{"publicKey": vapidKey}, r.body)
		raw, err := base64.RawURLEncoding.DecodeString(vapidKey)
		require.NoError(t, err, "base64url without padding")
		require.Len(t, raw, 65)
		require.Equal(t, byte(4), raw[0], "an uncompressed P-256 point")
		require.Equal(t, obj{"publicKey": vapidKey}, mustCall(t, g, anonymous, "GetVapidPublicKey", nil))
	})

	toks := map[string]string{}
	for _, n := range []string{"alice", "bob", "carol", "dave", "erin"} {
		toks[n] = createMember(t, d, admin, n)
	}
	as := func(n string) cred { return bearer(toks[n]) }

	t.Run("subscriptions", func(t *testing.T) {
		good := svc.NewSubscriber("/sub-good")
		b64 := base64.RawURLEncoding.EncodeToString
		offCurve := append([]byte{4}, make([]byte, 64)...)
		tests := []struct {
			name     string
			endpoint string
			p256dh   string
			auth     string
			noKeys   bool
		}{
			{name: "ftp endpoint", endpoint: "ftp://push.example/x"},
			{name: "not a URL", endpoint: "push endpoint"},
			{name: "empty endpoint", endpoint: ""},
			{name: "endpoint over 2048 bytes", endpoint: good.Endpoint() + "/" + strings.Repeat("a", 2048)},
			{name: "no keys", endpoint: good.Endpoint(), noKeys: true},
			{name: "p256dh not base64url", endpoint: good.Endpoint(), p256dh: "!!!", auth: good.Auth()},
			{name: "p256dh of 64 bytes", endpoint: good.Endpoint(), p256dh: b64(make([]byte, 64)), auth: good.Auth()},
			{name: "p256dh off the curve", endpoint: good.Endpoint(), p256dh: b64(offCurve), auth: good.Auth()},
			{name: "auth of 15 bytes", endpoint: good.Endpoint(), p256dh: good.P256dh(), auth: b64(make([]byte, 15))},
			{name: "auth missing", endpoint: good.Endpoint(), p256dh: good.P256dh()},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				req := obj{"endpoint": tc.endpoint}
				if !tc.noKeys {
					req["keys"] = obj{"p256dh": tc.p256dh, "auth": tc.auth}
				}
				for _, dr := range []driver{d, g} {
					mustFail(t, dr, as("alice"), "CreatePushSubscription", req, "bad_request")
				}
			})
		}
		t.Run("no credential", func(t *testing.T) {
			req := obj{"endpoint": good.Endpoint(), "keys": obj{"p256dh": good.P256dh(), "auth": good.Auth()}}
			mustFail(t, d, anonymous, "CreatePushSubscription", req, "unauthenticated")
			mustFail(t, g, anonymous, "CreatePushSubscription", req, "unauthenticated")
		})
		t.Run("create and delete", func(t *testing.T) {
			id := subscribeBrowser(t, d, as("alice"), good)
			mustFail(t, d, as("bob"), "DeletePushSubscription", obj{"id": id}, "not_found")
			mustFail(t, g, as("bob"), "DeletePushSubscription", obj{"id": id}, "not_found")
			mustFail(t, d, as("alice"), "DeletePushSubscription", obj{"id": "no-such-id"}, "not_found")
			// Registering the endpoint again keeps its id; it stays alice's.
			require.Equal(t, id, subscribeBrowser(t, g, as("alice"), good))
			// Another member who knows alice's endpoint but not its keys
			// cannot take it over.
			other := svc.NewSubscriber("/other-browser")
			req := obj{"endpoint": good.Endpoint(), "keys": obj{"p256dh": other.P256dh(), "auth": other.Auth()}}
			mustFail(t, d, as("bob"), "CreatePushSubscription", req, "conflict")
			mustFail(t, g, as("bob"), "CreatePushSubscription", req, "conflict")
			mustFail(t, d, as("bob"), "DeletePushSubscription", obj{"id": id}, "not_found")
			mustCall(t, g, as("alice"), "DeletePushSubscription", obj{"id": id})
			mustFail(t, d, as("alice"), "DeletePushSubscription", obj{"id": id}, "not_found")
			// Once alice dropped it, the endpoint is free to register.
			id = subscribeBrowser(t, d, as("bob"), good)
			// The same browser subscription (its own keys) posted by another
			// member signed in on that browser moves to that member, id and
			// all: it must not go on showing bob's pushes to alice.
			require.Equal(t, id, subscribeBrowser(t, g, as("alice"), good))
			mustFail(t, d, as("bob"), "DeletePushSubscription", obj{"id": id}, "not_found")
			mustCall(t, d, as("alice"), "DeletePushSubscription", obj{"id": id})
		})
	})

	// bob and dave are offline with a browser subscription each; carol has
	// one too but also a live stream.
	bobSub := svc.NewSubscriber("/bob")
	bobID := subscribeBrowser(t, d, as("bob"), bobSub)
	daveSub := svc.NewSubscriber("/dave")
	subscribeBrowser(t, d, as("dave"), daveSub)
	erinSub := svc.NewSubscriber("/erin")
	subscribeBrowser(t, d, as("erin"), erinSub)
	carolSub := svc.NewSubscriber("/carol")
	subscribeBrowser(t, d, as("carol"), carolSub)
	carolStream := p.subscribeSSE(t, toks["carol"], "carol", "")

	// payloadOf decodes one delivery and checks the request was sound.
	payloadOf := func(t *testing.T, dl webpushtest.Delivery) obj {
		t.Helper()
		require.NoError(t, dl.Err, "the push request passes VAPID and aes128gcm checks")
		require.Equal(t, vapidKey, dl.VAPIDKey, "signed with the config's VAPID key")
		require.Equal(t, "mailto:ops@example.com", dl.Subject, "SVC_WEBPUSH_SUBJECT")
		require.True(t, utf8.Valid(dl.Plaintext))
		var pl obj
		require.NoError(t, json.Unmarshal(dl.Plaintext, &pl), "payload %q", dl.Plaintext)
		for k := range pl {
			require.Contains(t, []string{"id", "from", "title", "body", "thread"}, k, "payload %v", pl)
		}
		return pl
	}

	t.Run("dm to an offline member is pushed", func(t *testing.T) {
		n := len(svc.Received())
		_, msg := mustPush(t, d, as("alice"), obj{"to": "bob", "title": "hello", "body": "are you there?"})
		got := waitPushes(t, svc, n+1)[n]
		require.Equal(t, "/bob", got.Path)
		pl := payloadOf(t, got)
		require.Equal(t, msg["id"], pl["id"])
		require.Equal(t, "alice", pl["from"])
		require.Equal(t, "hello", pl["title"])
		require.Equal(t, "are you there?", pl["body"])
	})

	t.Run("a long body is cut to fit", func(t *testing.T) {
		n := len(svc.Received())
		long := strings.Repeat("é", 6000) // 12000 bytes, two per rune
		_, msg := mustPush(t, g, as("alice"), obj{"to": "dave", "body": long})
		got := waitPushes(t, svc, n+1)[n]
		require.Equal(t, "/dave", got.Path)
		pl := payloadOf(t, got)
		require.Equal(t, msg["id"], pl["id"])
		body, _ := pl["body"].(string)
		require.NotEmpty(t, body)
		require.True(t, strings.HasPrefix(long, body), "the body is cut, not altered")
		require.Less(t, len(body), len(long))
	})

	t.Run("live members, broadcasts and channel posts are not pushed", func(t *testing.T) {
		n, bobBefore := len(svc.Received()), pushesTo(svc, "/bob")
		_, toCarol := mustPush(t, d, as("alice"), obj{"to": "carol", "body": "you are online"})
		require.Equal(t, toCarol, carolStream.nextMessage(t))
		mustPush(t, d, as("alice"), obj{"body": "to everyone"})
		require.Equal(t, "to everyone", carolStream.nextMessage(t)["body"])
		ch := mustCall(t, d, as("alice"), "CreateChannel", obj{"slug": "ops"})
		mustCall(t, d, as("alice"), "AddChannelMember", obj{"channel": ch["id"], "member": "bob"})
		mustPush(t, d, as("alice"), obj{"body": "channel news", "data": obj{"thread": "chan:" + ch["id"].(string)}})
		// A DM to erin after them all: once its push is in, anything those
		// pushes caused would be too.
		_, last := mustPush(t, d, as("alice"), obj{"to": "erin", "body": "fence"})
		got := waitPushes(t, svc, n+1)
		require.Len(t, got, n+1, "only the DM to erin is pushed: %+v", got[n:])
		require.Equal(t, "/erin", got[n].Path)
		require.Equal(t, last["id"], payloadOf(t, got[n])["id"])
		require.Zero(t, pushesTo(svc, "/carol"), "a member with a live stream gets no push")
		require.Equal(t, bobBefore, pushesTo(svc, "/bob"), "broadcasts and channel posts are not pushed")
	})

	t.Run("a gone subscription is removed", func(t *testing.T) {
		for _, tc := range []struct {
			member, path string
			status       int
		}{
			{member: "bob", path: "/bob", status: http.StatusGone},
			{member: "dave", path: "/dave", status: http.StatusNotFound},
		} {
			svc.SetStatus(tc.path, tc.status)
			before := pushesTo(svc, tc.path)
			n := len(svc.Received())
			mustPush(t, d, as("alice"), obj{"to": tc.member, "body": "gone?"})
			got := waitPushes(t, svc, n+1)
			require.Equal(t, tc.path, got[n].Path)
			// The fake records the request before svc reads the answer, so
			// wait for svc to say it acted on it.
			removed := `msg="web push subscription expired and removed" member=` + tc.member + " "
			require.Eventually(t, func() bool { return strings.Contains(p.stderr.String(), removed) },
				pushWait, 10*time.Millisecond, "svc never removed %s's subscription", tc.member)
			// The next DM makes no request to it; a DM to erin fences.
			n = len(svc.Received())
			mustPush(t, d, as("alice"), obj{"to": tc.member, "body": "still there?"})
			mustPush(t, d, as("alice"), obj{"to": "erin", "body": "fence"})
			got = waitPushes(t, svc, n+1)
			require.Equal(t, "/erin", got[n].Path)
			require.Equal(t, before+1, pushesTo(svc, tc.path), "%d from the push service removes the subscription", tc.status)
		}
		mustFail(t, d, as("bob"), "DeletePushSubscription", obj{"id": bobID}, "not_found")
	})

	t.Run("deleted subscription gets nothing", func(t *testing.T) {
		id := subscribeBrowser(t, d, as("erin"), erinSub)
		mustCall(t, d, as("erin"), "DeletePushSubscription", obj{"id": id})
		before := pushesTo(svc, "/erin")
		svc.SetStatus("/dave", 0)
		subscribeBrowser(t, d, as("dave"), daveSub)
		n := len(svc.Received())
		mustPush(t, d, as("alice"), obj{"to": "erin", "body": "unsubscribed"})
		mustPush(t, d, as("alice"), obj{"to": "dave", "body": "fence"})
		got := waitPushes(t, svc, n+1)
		require.Equal(t, "/dave", got[n].Path)
		require.Equal(t, before, pushesTo(svc, "/erin"))
	})
}

func TestWebPushDisabledWithoutConfig(t *testing.T) {
	t.Parallel()
	tok := randomToken(t)
	cfgPath := filepath.Join(t.TempDir(), "svc.json")
	writeConfig(t, cfgPath, obj{
		"team":  obj{"name": "team"},
		"store": obj{"members": []obj{{"name": "admin", "permissions": []string{"admin"}, "token": tok}}},
	})
	p := mustStartSvc(t, procOpts{configPath: cfgPath})
	requireRESTError(t, p.do(t, http.MethodGet, "/push/vapid-public-key", nil), "not_found")
	mustFail(t, grpcDriver{p.grpcConn(t)}, anonymous, "GetVapidPublicKey", nil, "not_found")
}

// TestWebPushEndpointScheme: without SVC_WEBPUSH_ALLOW_HTTP only https push
// endpoints are accepted.
func TestWebPushEndpointScheme(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	admin := bearer(p.adminToken(t))
	sub := webpushtest.NewService(t).NewSubscriber("/x")
	keys := obj{"p256dh": sub.P256dh(), "auth": sub.Auth()}
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			d := tr.connect(t, p)
			mustFail(t, d, admin, "CreatePushSubscription", obj{"endpoint": "http://push.example/" + tr.name, "keys": keys}, "bad_request")
			s := mustCall(t, d, admin, "CreatePushSubscription", obj{"endpoint": "https://push.example/" + tr.name, "keys": keys})
			mustCall(t, d, admin, "DeletePushSubscription", obj{"id": s["id"]})
		})
	}
}
