package clientaddr

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/realclientip/realclientip-go"
)

// Header is the one header read from a trusted proxy. Forwarded (RFC
// 7239) is not read: a proxy that manages X-Forwarded-For passes a
// client's own Forwarded header through unchanged, so reading both would
// let a client name its address (docs/DECISIONS.md, Reverse proxies).
const Header = "X-Forwarded-For"

// MaxHeader bounds the bytes of X-Forwarded-For read: only its right end
// names the client, so a longer header is cut to its last MaxHeader bytes
// on an entry boundary. 64 addresses of the longest form fit.
const MaxHeader = 4 << 10

// MaxProxies bounds the entries of a trusted-proxy list.
const MaxProxies = 256

// Proxies is the set of reverse proxies the operator trusts to say, in
// X-Forwarded-For, whom they forward. The zero value and nil trust none.
type Proxies struct {
	prefixes []netip.Prefix
	strategy realclientip.RightmostTrustedRangeStrategy
}

// Parse reads a comma-separated list of IP addresses and CIDR ranges
// ("10.0.0.1, 192.168.0.0/16, fd00::/8"); an empty list trusts none. An
// entry that is neither, a range with host bits set, a zone, or more than
// MaxProxies entries is an error naming the entry.
func Parse(list string) (*Proxies, error) {
	p := &Proxies{}
	for _, raw := range strings.Split(list, ",") {
		s := strings.TrimSpace(raw)
		if s == "" {
			continue
		}
		pfx, err := parseEntry(s)
		if err != nil {
			return nil, err
		}
		p.prefixes = append(p.prefixes, pfx)
	}
	if len(p.prefixes) > MaxProxies {
		return nil, fmt.Errorf("more than %d trusted proxies", MaxProxies)
	}
	nets := make([]net.IPNet, len(p.prefixes))
	for i, pfx := range p.prefixes {
		nets[i] = net.IPNet{IP: pfx.Addr().AsSlice(), Mask: net.CIDRMask(pfx.Bits(), pfx.Addr().BitLen())}
	}
	var err error
	if p.strategy, err = realclientip.NewRightmostTrustedRangeStrategy(Header, nets); err != nil {
		return nil, err
	}
	return p, nil
}

func parseEntry(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		pfx, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("%q: not an IP address or CIDR range", s)
		}
		if pfx.Addr().Is4In6() {
			return netip.Prefix{}, fmt.Errorf("%q: write an IPv4 range as IPv4", s)
		}
		if pfx != pfx.Masked() {
			return netip.Prefix{}, fmt.Errorf("%q: has bits set past the prefix length (did you mean %s?)", s, pfx.Masked())
		}
		return pfx, nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return netip.Prefix{}, fmt.Errorf("%q: not an IP address or CIDR range", s)
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// Len is how many addresses and ranges are trusted.
func (p *Proxies) Len() int {
	if p == nil {
		return 0
	}
	return len(p.prefixes)
}

// String lists the trusted addresses and ranges, comma-separated.
func (p *Proxies) String() string {
	if p == nil {
		return ""
	}
	s := make([]string, len(p.prefixes))
	for i, pfx := range p.prefixes {
		s[i] = pfx.String()
	}
	return strings.Join(s, ",")
}

// Trusted reports whether a is a trusted proxy.
func (p *Proxies) Trusted(a netip.Addr) bool {
	if p == nil || !a.IsValid() {
		return false
	}
	a = a.Unmap().WithZone("")
	for _, pfx := range p.prefixes {
		if pfx.Contains(a) {
			return true
		}
	}
	return false
}

// Client is the address of the client of a request whose TCP peer is
// peer and whose X-Forwarded-For lines are xff. Only a trusted peer's
// header is read: the client is its right-most entry that is not itself a
// trusted proxy (each trusted hop vouches for the entry to its left, and
// nothing further left can be believed). When that entry is not an
// address, or the header is absent or names only trusted proxies, the
// client is the peer: a request never gets to pick its address.
func (p *Proxies) Client(peer netip.Addr, xff []string) netip.Addr {
	peer = peer.Unmap().WithZone("")
	if len(xff) == 0 || !p.Trusted(peer) {
		return peer
	}
	ip := p.strategy.ClientIP(http.Header{Header: {bounded(xff)}}, "")
	if ip == "" {
		return peer
	}
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return peer
	}
	return a.Unmap().WithZone("")
}

// bounded joins the header's lines (one list, as RFC 9110 reads repeated
// list headers) and keeps at most MaxHeader bytes of its right end,
// starting at an entry boundary, so a cut never turns the tail of one
// address into another. Only a trusted proxy's header gets here, and
// net/http bounds the header block.
func bounded(xff []string) string {
	s := strings.Join(xff, ",")
	if len(s) <= MaxHeader {
		return s
	}
	s = s[len(s)-MaxHeader:]
	if i := strings.IndexByte(s, ','); i >= 0 {
		return s[i+1:]
	}
	return ""
}
