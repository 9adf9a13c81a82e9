package traefikplugin

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// requestKey returns what the hash strategy hashes for r. The commonest
// key, the URI, is read here (and ServeHTTP reads it inline, as here: under
// the interpreter the call would cost as much as the pick's dispatch); the
// others in otherKey, since a call pays for every value its function may
// compute.
func requestKey(s *settings, r *http.Request) string {
	if s.keyKind == keyURI && r.RequestURI != "" {
		return r.RequestURI
	}
	return otherKey(s, r)
}

// otherKey is requestKey for the keys it does not read itself: the client's
// address and a header here, the rarer ones in rareKey (each value a
// function may compute costs the interpreter on every call of it).
func otherKey(s *settings, r *http.Request) string {
	switch s.keyKind {
	case keyClientIP:
		return clientIP(s, r)
	case keyHeader:
		return headerKey(s, r)
	}
	return rareKey(s, r)
}

// headerKey is the first value of the key's header, or "".
func headerKey(s *settings, r *http.Request) string {
	if v := r.Header[s.keyName]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// rareKey is otherKey for the keys that are neither the client's address
// nor a header.
func rareKey(s *settings, r *http.Request) string {
	switch s.keyKind {
	case keyURI:
		return r.URL.RequestURI()
	case keyPath:
		return r.URL.Path
	case keyCookie:
		if c, err := r.Cookie(s.keyName); err == nil {
			return c.Value
		}
	case keyQuery:
		return r.URL.Query().Get(s.keyName)
	}
	return ""
}

// clientIP is the connection's peer address, unless the peer is a trusted
// proxy: then it is the one forwardedIP finds.
func clientIP(s *settings, r *http.Request) string {
	ip := peer(r.RemoteAddr)
	if len(s.trusted) == 0 || !trusts(s, ip) {
		return ip
	}
	return forwardedIP(s, r, ip)
}

// forwardedIP is the rightmost address in X-Forwarded-For that is not a
// trusted proxy (the leftmost entries are whatever the client wrote), or
// the last good one before a malformed entry; ip, the trusted peer, when
// there is none.
func forwardedIP(s *settings, r *http.Request, ip string) string {
	xff := r.Header["X-Forwarded-For"]
	for k := len(xff) - 1; k >= 0; k-- {
		parts := strings.Split(xff[k], ",")
		for j := len(parts) - 1; j >= 0; j-- {
			hop, ok := hopAddr(strings.TrimSpace(parts[j]))
			if !ok {
				return ip // a malformed hop: stop at the last good one
			}
			ip = hop
			if !trusts(s, hop) {
				return hop
			}
		}
	}
	return ip
}

// hopAddr reads one X-Forwarded-For hop: an address, or an address with a
// port (203.0.113.9:4711, [2001:db8::1]:4711), which some proxies write; it
// returns the address as nginx writes $remote_addr (see nginxAddr), since
// the text is what url_hash's clientip key hashes. Dotted IPv4 that netip
// reads (no leading zeros) is that form already. A hop with a zone
// (fe80::1%eth0) is malformed, as nginx's realip module finds it.
func hopAddr(hop string) (string, bool) {
	a, err := netip.ParseAddr(hop)
	if err == nil && a.Is4() {
		return hop, true
	}
	if err != nil {
		ap, err := netip.ParseAddrPort(hop)
		if err != nil {
			return "", false
		}
		a = ap.Addr()
	}
	if a.Zone() != "" {
		return "", false
	}
	return nginxAddr(a), true
}

// nginxAddr writes a as nginx writes a client address, $remote_addr
// (ngx_sock_ntop), which "hash $remote_addr" hashes: IPv4 dotted; IPv6 in
// RFC 5952's form (lower case, no leading zeros, the first longest run of
// two or more zero groups as "::"), as netip writes it, with an IPv4-mapped
// address's last 32 bits dotted (::ffff:192.0.2.1); and, as nginx does and
// netip does not, with the last 32 bits of an IPv4-compatible address
// dotted too (::192.0.2.1). Read back, the text gives ip_hash the
// address's 16 bytes, as nginx hashes them. a has no zone.
func nginxAddr(a netip.Addr) string {
	if b := a.As16(); a.Is6() && ipv4Compatible(b) {
		return "::" + netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}).String()
	}
	return a.String()
}

// ipv4Compatible reports whether nginx's ngx_inet6_ntop writes address b
// as "::" and a dotted IPv4 address: its first six groups are zero and the
// seventh is not, or the first seven are and the last two bytes are
// neither 0 nor 1 respectively (::1 stays ::1).
func ipv4Compatible(b [16]byte) bool {
	for k := 0; k < 12; k++ {
		if b[k] != 0 {
			return false
		}
	}
	if b[12] != 0 || b[13] != 0 {
		return true
	}
	return b[14] != 0 && b[15] != 1
}

// trusts reports whether address addr is one of the trusted proxies.
func trusts(s *settings, addr string) bool {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return false
	}
	a = a.Unmap()
	for _, t := range s.trusted {
		if t.Contains(a) {
			return true
		}
	}
	return false
}

// peer returns the host part of a "host:port" remote address, as
// net.SplitHostPort reads it, or the whole address when that fails. An
// address with one colon and no bracket, as an IPv4 peer's, is cut at the
// colon here: under the interpreter, SplitHostPort's three results cost
// more than the calls that check the form.
func peer(remote string) string {
	if i := strings.IndexAny(remote, ":[]"); i > 0 && remote[i] == ':' && strings.LastIndexAny(remote, ":[]") == i {
		return remote[:i]
	}
	if host, _, err := net.SplitHostPort(remote); err == nil {
		return host
	}
	return remote
}
