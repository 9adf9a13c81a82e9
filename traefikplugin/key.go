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
// returns the address's text.
func hopAddr(hop string) (string, bool) {
	if _, err := netip.ParseAddr(hop); err == nil {
		return hop, true
	}
	ap, err := netip.ParseAddrPort(hop)
	if err != nil {
		return "", false
	}
	return ap.Addr().String(), true
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
