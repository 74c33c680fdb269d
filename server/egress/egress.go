package egress

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"syscall"
	"time"
)

// DefaultTimeout bounds one request (connect, headers and body) unless
// Options says otherwise.
const DefaultTimeout = 10 * time.Second

// Policy says which addresses a client may connect to: public ones, and
// those in Allow.
type Policy struct {
	// Allow lists ranges that may be reached although they are not public
	// (a tool server on the LAN, loopback in tests). Empty: public only.
	Allow []netip.Prefix
}

// AllowAll is a policy that reaches every address.
var AllowAll = Policy{Allow: []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")}}

// ParsePolicy reads a comma-separated list of CIDR ranges or addresses
// (SVC_EGRESS_ALLOW); "" is public only.
func ParsePolicy(s string) (Policy, error) {
	var p Policy
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if !strings.Contains(f, "/") {
			a, err := netip.ParseAddr(f)
			if err != nil {
				return Policy{}, fmt.Errorf("egress allow list: %q is not an address or CIDR range", f)
			}
			p.Allow = append(p.Allow, netip.PrefixFrom(a, a.BitLen()))
			continue
		}
		pr, err := netip.ParsePrefix(f)
		if err != nil {
			return Policy{}, fmt.Errorf("egress allow list: %q is not an address or CIDR range", f)
		}
		p.Allow = append(p.Allow, pr.Masked())
	}
	return p, nil
}

// Permits reports whether the policy lets a client connect to ip.
func (p Policy) Permits(ip netip.Addr) bool {
	ip = ip.Unmap()
	for _, pr := range p.Allow {
		if pr.Contains(ip) {
			return true
		}
	}
	return Public(ip)
}

// Public reports whether ip is a routable public address.
func Public(ip netip.Addr) bool {
	ip = ip.Unmap()
	return ip.IsValid() && !(ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsUnspecified() || ip.IsMulticast() || ip.IsInterfaceLocalMulticast())
}

// Options configure a client.
type Options struct {
	Policy Policy
	// Timeout bounds one request; 0 is DefaultTimeout.
	Timeout time.Duration
	// MaxIdleConnsPerHost keeps connections for reuse; 0 is net/http's
	// default.
	MaxIdleConnsPerHost int
}

// NewClient returns an HTTP client that connects only where the policy
// permits, follows no redirects (a redirect could lead anywhere), and uses
// no proxy from the environment (a proxy would hide the destination).
func NewClient(o Options) *http.Client {
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	policy := o.Policy
	d := &net.Dialer{
		Timeout: timeout,
		Control: func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("egress: %w", err)
			}
			if !policy.Permits(ap.Addr()) {
				return &RefusedError{Addr: ap.Addr()}
			}
			return nil
		},
	}
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			DialContext:         d.DialContext,
			TLSHandshakeTimeout: timeout,
			MaxIdleConnsPerHost: o.MaxIdleConnsPerHost,
			ForceAttemptHTTP2:   true,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// RefusedError is a connection the policy refused.
type RefusedError struct{ Addr netip.Addr }

func (e *RefusedError) Error() string {
	return fmt.Sprintf("egress: address %s is not public and not allowed", e.Addr)
}
