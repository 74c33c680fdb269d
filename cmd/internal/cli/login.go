package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"time"

	"svc/cmd/internal/client"
)

// slowDownStep is what a slow_down answer adds to the poll interval (RFC
// 8628 §3.5 and docs/ENROLLMENT.md).
const slowDownStep = 5 * time.Second

// maxLabelHint bounds --label before it is sent.
const maxLabelHint = 200

type enrollStart struct {
	DeviceCode              string `json:"deviceCode"`
	UserCode                string `json:"userCode"`
	VerificationURI         string `json:"verificationUri"`
	VerificationURIComplete string `json:"verificationUriComplete"`
	ExpiresIn               int    `json:"expiresIn"`
	Interval                int    `json:"interval"`
}

type enrollToken struct {
	Token  string `json:"token"`
	Member string `json:"member"`
}

// Login runs `svc login [--url U] [--label L]`: the device-code flow over
// REST. It prints the user code and verification URLs, polls at the
// broker's interval (+5 s per slow_down) until approval, rejection or
// expiry, and on approval writes the token to the cache entry of the URL.
// The token is never printed.
func Login(ctx context.Context, args []string, env Env) error {
	fs := flag.NewFlagSet("login", flag.ContinueOnError)
	var c common
	c.register(fs, false)
	label := fs.String("label", "", "label hint shown to the approver (e.g. this machine's name)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("login takes no arguments (got %q)", pos[0])
	}
	if len(*label) > maxLabelHint {
		return usagef("--label: at most %d bytes", maxLabelHint)
	}
	cachePath, err := client.CachePath(env.Getenv)
	if err != nil {
		return err
	}
	// Refuse a corrupt cache before the user approves anything.
	if _, err := client.LoadCache(cachePath); err != nil {
		return err
	}
	cl, err := connect(c, env, false)
	if err != nil {
		return err
	}
	defer cl.Close()

	var start enrollStart
	body := map[string]any{}
	if *label != "" {
		body["labelHint"] = *label
	}
	sctx, cancel := context.WithTimeout(ctx, callTimeout)
	err = cl.Do(sctx, http.MethodPost, "/enroll", body, &start)
	cancel()
	if err != nil {
		return fail(cl, err)
	}
	if start.DeviceCode == "" || start.UserCode == "" {
		return fmt.Errorf("%s does not look like an svc broker (no device code in POST /enroll)", cl.URL())
	}
	fmt.Fprintf(env.Stdout, "To sign in, ask an admin to approve this code, or open:\n  %s\nand enter the code: %s\n", start.VerificationURI, start.UserCode)
	if start.VerificationURIComplete != "" {
		fmt.Fprintf(env.Stdout, "Or open directly: %s\n", start.VerificationURIComplete)
	}
	fmt.Fprintln(env.Stdout, "Waiting for approval...")

	interval := time.Duration(start.Interval) * time.Second
	if interval <= 0 {
		interval = 5 * time.Second
	}
	expires := time.Duration(start.ExpiresIn) * time.Second
	if expires <= 0 {
		expires = 5 * time.Minute
	}
	deadline := env.now().Add(expires)
	for first := true; ; first = false {
		if !first {
			if err := env.sleep(ctx, interval); err != nil {
				return errors.New("login interrupted")
			}
		}
		var tok enrollToken
		pctx, cancel := context.WithTimeout(ctx, callTimeout)
		err := cl.Do(pctx, http.MethodPost, "/enroll/poll", map[string]string{"deviceCode": start.DeviceCode}, &tok)
		cancel()
		switch client.Code(err) {
		case "":
			if err != nil {
				if ctx.Err() != nil {
					return errors.New("login interrupted")
				}
				return fail(cl, err)
			}
			if tok.Token == "" {
				return fmt.Errorf("%s answered the poll without a token", cl.URL())
			}
			if err := client.SaveToken(cachePath, cl.URL(), tok.Token, env.now()); err != nil {
				return err
			}
			fmt.Fprintf(env.Stdout, "Logged in to %s as %s (token saved in %s)\n", cl.URL(), tok.Member, cachePath)
			return nil
		case "authorization_pending":
		case "slow_down":
			interval += slowDownStep
		case "expired_token":
			return errors.New("login failed: the code expired before it was approved; run `svc login` again")
		case "access_denied":
			reason := "no reason given"
			var ae *client.APIError
			if errors.As(err, &ae) && ae.Description != "" {
				reason = ae.Description
			}
			return fmt.Errorf("login rejected: %s", reason)
		default:
			return fail(cl, err)
		}
		if !env.now().Before(deadline) {
			return errors.New("login failed: the code expired before it was approved; run `svc login` again")
		}
	}
}
