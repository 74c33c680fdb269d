package main

// The NATS connection of a broker that shares its team with others
// (--nats-url; docs/DECISIONS.md, "Several brokers: fan-out on NATS").

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// NATS client settings of a broker.
const (
	// natsReconnectWait spaces reconnect attempts; the broker reconnects
	// for as long as it runs (the store's polls deliver meanwhile).
	natsReconnectWait = 250 * time.Millisecond
	// natsPingInterval bounds how long a dead connection goes unnoticed
	// (nats.go's default is two minutes): each ping not answered counts,
	// and two make the client reconnect.
	natsPingInterval = 5 * time.Second
	// natsConnectWithin bounds the first connection at start.
	natsConnectWithin = 10 * time.Second
)

// parseNATSURL checks a --nats-url value: one or more comma-separated
// nats:// or tls:// URLs, and only beside --db-url (brokers share their
// store). The value is never repeated in an error: it may hold a
// password.
func parseNATSURL(v string, haveDB bool) (string, error) {
	if v == "" {
		return "", nil
	}
	if !haveDB {
		return "", &exitError{code: 2, err: errors.New("--nats-url (SVC_NATS_URL) needs --db-url: brokers that share a team share its PostgreSQL database")}
	}
	for part := range strings.SplitSeq(v, ",") {
		u, err := url.Parse(strings.TrimSpace(part))
		if err != nil || (u.Scheme != "nats" && u.Scheme != "tls") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || !credentialsReadable(part, u) {
			return "", &exitError{code: 2, err: errors.New("--nats-url/SVC_NATS_URL: must be nats://[user:pass@]host:port (or tls://), comma-separated for several servers")}
		}
	}
	return v, nil
}

// redactNATSURL is a --nats-url value as svc prints it: no password, no
// token.
func redactNATSURL(v string) string {
	parts := strings.Split(v, ",")
	for i, p := range parts {
		u, err := url.Parse(strings.TrimSpace(p))
		if err != nil || !credentialsReadable(p, u) {
			parts[i] = "(a NATS server)"
			continue
		}
		if u.User != nil {
			if _, ok := u.User.Password(); ok {
				u.User = url.UserPassword(u.User.Username(), "xxxxx")
			} else {
				u.User = url.User("xxxxx") // a lone user part is a token
			}
		}
		parts[i] = u.String()
	}
	return strings.Join(parts, ",")
}

// connectNATS connects a broker to the team's NATS: reconnecting forever,
// noticing a dead server within a few pings, logging each change.
func connectNATS(rawURL, name string, log *slog.Logger) (*nats.Conn, error) {
	nc, err := nats.Connect(rawURL,
		nats.Name(name),
		nats.Timeout(natsConnectWithin),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(natsReconnectWait),
		nats.PingInterval(natsPingInterval),
		nats.MaxPingsOutstanding(2),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			log.Warn("nats disconnected; live traffic of other brokers comes from the store until it is back", "err", err)
		}),
		nats.ReconnectHandler(func(c *nats.Conn) { log.Info("nats reconnected", "server", c.ConnectedUrlRedacted()) }),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			log.Warn("nats error", "err", err)
		}),
	)
	if err != nil {
		return nil, fmt.Errorf("connect to NATS %s: %w", redactNATSURL(rawURL), err)
	}
	return nc, nil
}
