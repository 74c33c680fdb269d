package toolsources

import (
	"context"
	"encoding/json"
	"net"
	"net/url"
	"strings"

	"svc/server/apierr"
	"svc/server/registry"
	"svc/store"
)

// A tool source's credential is bound to the origin (scheme, host, port)
// it was set for, sealed with it so that nobody holding tools.manage can
// redirect it: see docs/TOOLCALL.md (Credential origin).

// credEnvelope prefixes the sealed plaintext of a credential that carries
// its origin. A secret is a header value, which never holds a newline, so
// a value without the prefix is one sealed before origins were recorded.
const credEnvelope = "svc-tool-credential-v1\n"

// sealedCred is what the envelope holds. Origin "" on a custom source
// means no tool was defined when the credential was set: the next tool
// defined pins it.
type sealedCred struct {
	Origin string `json:"origin"`
	Secret string `json:"secret"`
}

// origin returns the origin of an http or https URL as
// scheme://host:port, lower case, the port explicit; "" when raw is not
// one, or names a user or an escaped host. A templated path does not
// matter: only the authority is read.
func origin(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User != nil || u.Host == "" || strings.ContainsAny(u.Host, "%\\") {
		return ""
	}
	scheme := strings.ToLower(u.Scheme)
	port := u.Port()
	switch {
	case scheme != "http" && scheme != "https":
		return ""
	case port == "" && scheme == "http":
		port = "80"
	case port == "":
		port = "443"
	}
	if u.Hostname() == "" {
		return ""
	}
	return scheme + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// openCred opens a source's sealed credential: the secret and the origin
// it is bound to; legacy reports a value sealed without an origin.
func (s *Service) openCred(x store.ToolSource) (c sealedCred, legacy bool, err error) {
	plain, err := s.d.Registry.Open(x.Credential.Secret, registry.ToolSources.PurposeOf(x.Slug))
	if err != nil {
		return c, false, err
	}
	rest, ok := strings.CutPrefix(string(plain), credEnvelope)
	if !ok {
		return sealedCred{Secret: string(plain)}, true, nil
	}
	if err := json.Unmarshal([]byte(rest), &c); err != nil {
		return c, false, err
	}
	return c, false, nil
}

// sealCred seals secret bound to org for source slug.
func (s *Service) sealCred(slug, org, secret string) ([]byte, error) {
	b, err := json.Marshal(sealedCred{Origin: org, Secret: secret})
	if err != nil {
		return nil, err
	}
	return s.d.Registry.Seal(append([]byte(credEnvelope), b...), registry.ToolSources.PurposeOf(slug))
}

// credentialOrigin is the origin a credential being set on x is bound to:
// an mcp source's config.url; a custom source's tools' one origin ("" when
// it has no tool yet: the first one defined pins it). A custom source
// whose tools span several origins cannot hold one credential (409).
func credentialOrigin(x store.ToolSource) (string, error) {
	if x.Kind == KindMCP {
		u, err := mcpURL(x.Config)
		if err != nil {
			return "", err
		}
		return origin(u), nil
	}
	org := ""
	for _, t := range x.Tools {
		var b struct {
			URL string `json:"url"`
		}
		if err := json.Unmarshal(t.Binding, &b); err != nil {
			return "", err
		}
		o := origin(b.URL)
		if org != "" && o != org {
			return "", apierr.Errorf(apierr.CodeConflict, "tool source %q's tools call %s and %s: one credential is bound to one origin", x.Slug, org, o)
		}
		org = o
	}
	return org, nil
}

// pinCredential checks a custom tool's binding URL against the source's
// credential before the tool is stored: a credential bound to another
// origin refuses the binding (400 binding.url); one set before any tool
// was defined is bound here to the binding's origin. A value sealed
// before origins were recorded is left as it is: it is never sent.
func (s *Service) pinCredential(ctx context.Context, tx store.Tx, x *store.ToolSource, bindingURL string) error {
	if x.Credential.Kind == "" {
		return nil
	}
	c, legacy, err := s.openCred(*x)
	if err != nil || legacy {
		return err
	}
	org := origin(bindingURL)
	switch {
	case c.Origin == org:
		return nil
	case c.Origin != "":
		return apierr.Invalid("binding.url", "calls %s, but the source's credential is bound to %s: delete the credential first, or use another source", org, c.Origin)
	}
	sealed, err := s.sealCred(x.Slug, org, c.Secret)
	if err != nil {
		return err
	}
	cred := x.Credential
	cred.Secret = sealed
	if err := tx.SetToolCredential(ctx, x.Slug, cred, s.d.Now()); err != nil {
		return err
	}
	x.Credential = cred
	return nil
}

// BindLegacyCredentials runs once at start, before any request: each
// credential sealed before origins were recorded is bound to the origin
// its source is configured for now (an mcp source's config.url; a custom
// source's tools' one origin) and re-sealed with it, one write each,
// logged without the value. A custom source with no tool, or tools on
// several origins, has no one origin to trust: its credential stays
// withheld until set again, with a warning. Without a KEK nothing can be
// opened and nothing is done. It returns how many it bound; an error is
// the store's.
func (s *Service) BindLegacyCredentials(ctx context.Context) (int, error) {
	if s.d.Registry.Sealing() != nil {
		return 0, nil
	}
	xs, err := s.d.Store.ListToolSources(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, x := range xs {
		if x.Credential.Kind == "" {
			continue
		}
		c, legacy, err := s.openCred(x)
		if err != nil {
			s.d.Log.Warn("tool credential cannot be opened; it is withheld until set again", "source", x.Slug, "err", err)
			continue
		}
		if !legacy {
			continue
		}
		org, err := credentialOrigin(x)
		if err != nil || org == "" {
			s.d.Log.Warn("tool credential sealed without an origin stays withheld: its source calls no single origin (no tool, or tools on several origins); set it again",
				"source", x.Slug, "kind", x.Kind)
			continue
		}
		sealed, err := s.sealCred(x.Slug, org, c.Secret)
		if err != nil {
			return n, err
		}
		cred := x.Credential
		cred.Secret = sealed
		// The source's updatedAt is kept: nothing a member set has changed.
		if err := s.d.Store.WithTx(ctx, func(tx store.Tx) error {
			return tx.SetToolCredential(ctx, x.Slug, cred, x.UpdatedAt)
		}); err != nil {
			return n, err
		}
		n++
		s.d.Log.Info("tool credential sealed without an origin bound to the origin configured at start", "source", x.Slug, "kind", x.Kind, "origin", org)
	}
	return n, nil
}
