package web

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// Resolver looks up the addresses of a host. *net.Resolver implements it.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// BlockedError says that a fetch was refused because every address of its
// host is in a range web_fetch does not reach (loopback, private, link-local,
// cloud metadata, …) and the host is not allow-listed.
type BlockedError struct {
	Host  string
	Addr  netip.Addr
	Class string // "loopback", "private", "link-local", "metadata", …
}

func (e *BlockedError) Error() string {
	if e.Host == e.Addr.String() {
		return fmt.Sprintf("address %s is %s address", e.Addr, article(e.Class))
	}
	return fmt.Sprintf("host %s resolves to %s, %s address", e.Host, e.Addr, article(e.Class))
}

func article(class string) string {
	switch class[0] {
	case 'a', 'e', 'i', 'o', 'u':
		return "an " + class
	}
	return "a " + class
}

// Address classes that are refused unless allow-listed. The checks of
// netip.Addr cover loopback (127/8, ::1), private (RFC 1918, fc00::/7),
// link-local (169.254/16, fe80::/10), multicast and unspecified addresses;
// these prefixes add the rest.
var (
	metadataAddrs = []netip.Addr{
		netip.MustParseAddr("169.254.169.254"), // AWS, GCP, Azure, OpenStack…
		netip.MustParseAddr("fd00:ec2::254"),   // AWS over IPv6
	}
	extraBlocked = []struct {
		prefix netip.Prefix
		class  string
	}{
		{netip.MustParsePrefix("100.64.0.0/10"), "shared (CGNAT)"},
		{netip.MustParsePrefix("0.0.0.0/8"), "this-network"},
		{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol"},
		{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},
		{netip.MustParsePrefix("240.0.0.0/4"), "reserved"}, // includes 255.255.255.255
	}
	nat64 = netip.MustParsePrefix("64:ff9b::/96")
)

// classify returns the class of a refused address, or "" for an address
// web_fetch may reach.
func classify(a netip.Addr) string {
	a = a.Unmap().WithZone("")
	if nat64.Contains(a) { // the IPv4 address it translates to decides
		b := a.As16()
		return classify(netip.AddrFrom4([4]byte(b[12:])))
	}
	for _, m := range metadataAddrs {
		if a == m {
			return "metadata"
		}
	}
	switch {
	case !a.IsValid():
		return "invalid"
	case a.IsUnspecified():
		return "unspecified"
	case a.IsLoopback():
		return "loopback"
	case a.IsPrivate():
		return "private"
	case a.IsLinkLocalUnicast():
		return "link-local"
	case a.IsMulticast(), a.IsLinkLocalMulticast(), a.IsInterfaceLocalMulticast():
		return "multicast"
	}
	for _, b := range extraBlocked {
		if b.prefix.Contains(a) {
			return b.class
		}
	}
	return ""
}

// guard decides which hosts and addresses a fetch may connect to and dials
// only those.
type guard struct {
	hosts    map[string]bool
	cidrs    []netip.Prefix
	resolver Resolver
	dial     func(ctx context.Context, network, address string) (net.Conn, error)
}

func normalHost(h string) string { return strings.TrimSuffix(strings.ToLower(h), ".") }

func (g *guard) hostAllowed(host string) bool { return g.hosts[normalHost(host)] }

// allowed reports whether the address may be reached, and if not, its class.
func (g *guard) allowed(a netip.Addr) (bool, string) {
	class := classify(a)
	if class == "" {
		return true, ""
	}
	u := a.Unmap().WithZone("")
	for _, p := range g.cidrs {
		if p.Contains(u) {
			return true, ""
		}
	}
	return false, class
}

// dialContext is the transport's DialContext. It resolves the host itself
// and connects only to addresses that pass the check, so a name that
// resolves (or rebinds) to a private address is refused whatever the URL or
// redirect that led to it.
func (g *guard) dialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else {
		addrs, err = g.resolver.LookupNetIP(ctx, ipNetwork(network), host)
		if err != nil {
			return nil, &resolveError{host: host, err: err}
		}
		if len(addrs) == 0 {
			return nil, &resolveError{host: host, err: errors.New("no addresses")}
		}
	}
	hostOK := g.hostAllowed(host)
	var blocked *BlockedError
	var dialErr error
	for _, a := range addrs {
		if !hostOK {
			if ok, class := g.allowed(a); !ok {
				if blocked == nil {
					blocked = &BlockedError{Host: host, Addr: a.Unmap(), Class: class}
				}
				continue
			}
		}
		conn, err := g.dial(ctx, network, net.JoinHostPort(a.Unmap().String(), port))
		if err == nil {
			return conn, nil
		}
		dialErr = err
		if ctx.Err() != nil {
			break
		}
	}
	if dialErr != nil {
		return nil, dialErr
	}
	return nil, blocked
}

func ipNetwork(network string) string {
	switch network {
	case "tcp4", "udp4":
		return "ip4"
	case "tcp6", "udp6":
		return "ip6"
	}
	return "ip"
}

// resolveError is a failed DNS lookup.
type resolveError struct {
	host string
	err  error
}

func (e *resolveError) Error() string { return fmt.Sprintf("cannot resolve %s: %v", e.host, e.err) }
func (e *resolveError) Unwrap() error { return e.err }
