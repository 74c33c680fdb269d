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

// idleConnTimeout closes a kept connection unused this long.
const idleConnTimeout = 90 * time.Second

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

// specialPurpose are the ranges a request to a member-chosen address must
// never reach: the IANA IPv4 and IPv6 Special-Purpose Address Registries
// (every entry that is not plainly global unicast, and the translation
// prefixes that embed an IPv4 address, which could lead back inside), plus
// multicast and the reserved space.
var specialPurpose = func() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range []string{
		// IPv4 (RFC 6890 and updates)
		"0.0.0.0/8",          // "this network"
		"10.0.0.0/8",         // private
		"100.64.0.0/10",      // shared address space (carrier-grade NAT)
		"127.0.0.0/8",        // loopback
		"169.254.0.0/16",     // link local
		"172.16.0.0/12",      // private
		"192.0.0.0/24",       // IETF protocol assignments
		"192.0.2.0/24",       // documentation (TEST-NET-1)
		"192.31.196.0/24",    // AS112-v4
		"192.52.193.0/24",    // AMT
		"192.88.99.0/24",     // deprecated 6to4 relay anycast
		"192.168.0.0/16",     // private
		"192.175.48.0/24",    // direct delegation AS112
		"198.18.0.0/15",      // benchmarking
		"198.51.100.0/24",    // documentation (TEST-NET-2)
		"203.0.113.0/24",     // documentation (TEST-NET-3)
		"224.0.0.0/4",        // multicast
		"240.0.0.0/4",        // reserved for future use
		"255.255.255.255/32", // limited broadcast
		// IPv6 (RFC 6890 and updates)
		"::/128",            // unspecified
		"::1/128",           // loopback
		"::/96",             // IPv4-compatible (deprecated)
		"::ffff:0:0/96",     // IPv4-mapped (checked as IPv4 too)
		"64:ff9b::/96",      // IPv4/IPv6 translation (NAT64)
		"64:ff9b:1::/48",    // local-use IPv4/IPv6 translation
		"100::/64",          // discard-only
		"100:0:0:1::/64",    // dummy prefix
		"2001::/23",         // IETF protocol assignments (Teredo, ORCHID, ...)
		"2001:db8::/32",     // documentation
		"2002::/16",         // 6to4
		"2620:4f:8000::/48", // direct delegation AS112
		"3fff::/20",         // documentation
		"5f00::/16",         // segment routing (SRv6) SIDs
		"fc00::/7",          // unique local
		"fe80::/10",         // link local
		"fec0::/10",         // site local (deprecated)
		"ff00::/8",          // multicast
	} {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}()

// Public reports whether ip is a routable public address: valid, and in
// none of the special-purpose ranges.
func Public(ip netip.Addr) bool {
	if !ip.IsValid() || ip.Zone() != "" {
		return false
	}
	ip = ip.Unmap()
	for _, p := range specialPurpose {
		if p.Contains(ip) {
			return false
		}
	}
	return true
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
			// Kept connections lead to hosts members chose: not forever.
			IdleConnTimeout:   idleConnTimeout,
			ForceAttemptHTTP2: true,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// RefusedError is a connection the policy refused.
type RefusedError struct{ Addr netip.Addr }

func (e *RefusedError) Error() string {
	return fmt.Sprintf("egress: address %s is not public and not allowed", e.Addr)
}
