package server

import (
	"testing"
	"time"

	"svc/server/hub"
)

// nextEvent waits up to wait for the next event of sub and returns it,
// failing the test when none comes or the subscription ends.
func nextEvent(t testing.TB, sub *hub.Subscription, wait time.Duration) *hub.Event {
	t.Helper()
	deadline := time.After(wait)
	for {
		ev, open := sub.Next()
		switch {
		case ev != nil:
			return ev
		case !open:
			t.Fatal("the subscription ended")
		}
		select {
		case <-sub.Ready():
		case <-deadline:
			t.Fatalf("no event within %s", wait)
		}
	}
}
