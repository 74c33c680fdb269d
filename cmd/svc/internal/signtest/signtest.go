// Package signtest signs webhook deliveries with real signers made
// elsewhere, for tests of svc/server/hooks: the standardwebhooks npm
// package (the Standard Webhooks reference library, as Svix uses) and
// Stripe's official stripe npm package, each pinned and installed with
// npmcache into a cache outside the repository, and run with node. It is
// test support: import it from tests only. It never skips: without node
// or npm the test fails.
package signtest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"svc/cmd/svc/internal/npmcache"
)

// Pinned releases.
const (
	StandardWebhooksVersion = "1.1.1"
	StripeVersion           = "23.1.0"
)

const (
	installTimeout = 5 * time.Minute
	signTimeout    = 30 * time.Second
)

var (
	standardPackage = pinned("standardwebhooks", StandardWebhooksVersion, "dist/index.js")
	stripePackage   = pinned("stripe", StripeVersion, "package.json")
)

func pinned(name, version, entry string) npmcache.Package {
	return npmcache.Package{
		Name: name, Version: version,
		Dir:            name + "-" + version,
		InstallTimeout: installTimeout,
		Verify: func(dir string) error {
			pkg := filepath.Join(dir, "node_modules", name)
			b, err := os.ReadFile(filepath.Join(pkg, "package.json"))
			if err != nil {
				return err
			}
			var meta struct{ Name, Version string }
			if err := json.Unmarshal(b, &meta); err != nil {
				return fmt.Errorf("%s/package.json: %w", pkg, err)
			}
			if meta.Name != name || meta.Version != version {
				return fmt.Errorf("%s holds %s@%s, want %s@%s", pkg, meta.Name, meta.Version, name, version)
			}
			_, err = os.Stat(filepath.Join(pkg, filepath.FromSlash(entry)))
			return err
		},
	}
}

var (
	installMu sync.Mutex
	installed = map[string]string{} // package name → verified module dir, in this process
)

// moduleDir installs p on first use and returns its module directory.
func moduleDir(t testing.TB, p npmcache.Package) string {
	t.Helper()
	installMu.Lock()
	defer installMu.Unlock()
	if d, ok := installed[p.Name]; ok {
		return d
	}
	dir, err := p.Ensure(t)
	if err != nil {
		t.Fatalf("signtest: %s@%s is needed by this test and could not be installed: %v", p.Name, p.Version, err)
	}
	d := filepath.Join(dir, "node_modules", p.Name)
	installed[p.Name] = d
	return d
}

// signScript reads {module, kind, secret, id, ts, body (base64)} on
// stdin and prints the signature header the real library makes.
const signScript = `'use strict';
let input = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', (c) => { input += c; });
process.stdin.on('end', () => {
  const req = JSON.parse(input);
  const body = Buffer.from(req.body, 'base64').toString('utf8');
  let out;
  if (req.kind === 'standard-webhooks') {
    const { Webhook } = require(req.module);
    out = new Webhook(req.secret).sign(req.id, new Date(req.ts * 1000), body);
  } else if (req.kind === 'stripe') {
    const Stripe = require(req.module);
    const stripe = new Stripe('sk_test_signtest_offline');
    out = stripe.webhooks.generateTestHeaderString({ payload: body, secret: req.secret, timestamp: req.ts });
  } else {
    throw new Error('unknown kind ' + req.kind);
  }
  process.stdout.write(JSON.stringify({ header: out }));
});
`

func sign(t testing.TB, p npmcache.Package, kind, secret, id string, ts time.Time, body []byte) string {
	t.Helper()
	mod := moduleDir(t, p)
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("signtest: node is not on PATH (install Node.js, e.g. `apt-get install -y nodejs npm`): %v", err)
	}
	in, err := json.Marshal(map[string]any{
		"module": mod, "kind": kind, "secret": secret, "id": id,
		"ts": ts.Unix(), "body": base64.StdEncoding.EncodeToString(body),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), signTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "-e", signScript)
	cmd.Stdin = bytes.NewReader(in)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	npmcache.KillGroupOnCancel(cmd)
	if err := cmd.Run(); err != nil {
		t.Fatalf("signtest: node signing with %s@%s: %v\n%s", p.Name, p.Version, err, npmcache.Tail(stderr.String(), 4000))
	}
	var out struct{ Header string }
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil || out.Header == "" {
		t.Fatalf("signtest: node printed %q: %v", npmcache.Tail(stdout.String(), 400), err)
	}
	return out.Header
}

// StandardWebhooks signs body as the standardwebhooks package does with
// secret (whsec_<base64>), message id and timestamp, and returns the
// three headers a sender sends: webhook-id, webhook-timestamp and
// webhook-signature. body must be UTF-8 (the library signs a string).
func StandardWebhooks(t testing.TB, secret, id string, ts time.Time, body []byte) http.Header {
	t.Helper()
	sig := sign(t, standardPackage, "standard-webhooks", secret, id, ts, body)
	h := http.Header{}
	h.Set("webhook-id", id)
	h.Set("webhook-timestamp", fmt.Sprint(ts.Unix()))
	h.Set("webhook-signature", sig)
	return h
}

// Stripe returns the Stripe-Signature header value that Stripe's own
// stripe.webhooks.generateTestHeaderString makes for body, secret and
// timestamp. body must be UTF-8 (the library signs a string).
func Stripe(t testing.TB, secret string, body []byte, ts time.Time) string {
	t.Helper()
	return sign(t, stripePackage, "stripe", secret, "", ts, body)
}
