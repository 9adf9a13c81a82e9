// Package stickydata is the schema of nginx's sticky-session recordings
// under conformance/testdata/sticky (README.md there describes every
// field): what a real nginx 1.31.4 answered, request by request. The
// recorder and the data check in package conformance, and the replays
// through core, a real Caddy and the Traefik plugin, read them through it.
package stickydata

import (
	"crypto/md5"
	"encoding/hex"
)

// Family is one recorded file: a family of cases sharing a theme.
type Family struct {
	Family       string `json:"family"`
	About        string `json:"about"`
	NginxVersion string `json:"nginx_version"` // the first line of "nginx -v"
	Command      string `json:"command"`       // how the file was recorded
	Cases        []Case `json:"cases"`
}

// Case is one upstream block and the requests sent through it, in order.
type Case struct {
	Name  string `json:"name"`  // upstream name and location path
	About string `json:"about"` // what the case shows
	// Method is round_robin, least_conn, ip_hash, hash or hash_consistent;
	// HashKey is hash's key ("$arg_k") and empty otherwise.
	Method  string `json:"method"`
	HashKey string `json:"hash_key,omitempty"`
	// Sticky is the sticky directive exactly as written in the block, "" for
	// none; Mode is its first word (cookie, route, learn).
	Sticky string `json:"sticky"`
	Mode   string `json:"mode"`
	// CookieName is sticky cookie's NAME.
	CookieName string `json:"cookie_name,omitempty"`
	// ExpiresSeconds is sticky cookie's expires= in seconds (nil without
	// expires=, -1 for expires=max).
	ExpiresSeconds *int64 `json:"expires_seconds,omitempty"`
	// Upstream is the upstream block, Location the location in front of it,
	// both as nginx.conf has them.
	Upstream string   `json:"upstream"`
	Location string   `json:"location"`
	Servers  []Server `json:"servers"`
	// ConfigTest is "nginx -t" of a configuration with this case alone.
	ConfigTest ConfigTest `json:"config_test"`
	// Requests is empty when nginx refused the configuration.
	Requests []Exchange `json:"requests,omitempty"`
}

// Server is one server line of the block, in order.
type Server struct {
	Address  string `json:"address"`
	Weight   int    `json:"weight"`
	Down     bool   `json:"down,omitempty"`
	Drain    bool   `json:"drain,omitempty"`
	Backup   bool   `json:"backup,omitempty"`
	Route    string `json:"route,omitempty"`
	MaxConns int    `json:"max_conns,omitempty"`
	// Listening is false for an address nothing listens on (connection
	// refused), used to show failed servers.
	Listening bool `json:"listening"`
}

// ConfigTest is the outcome of "nginx -t": OK is its exit status, and
// Messages its lines with the temporary directory written as PREFIX.
type ConfigTest struct {
	OK       bool     `json:"ok"`
	Messages []string `json:"messages"`
}

// Exchange is one request and nginx's answer.
type Exchange struct {
	Method string `json:"method"`
	Target string `json:"target"` // path and raw query, sent as is
	// Headers are the request's headers beyond Host, "Name: value", in the
	// order sent; a name may repeat.
	Headers []string `json:"headers,omitempty"`
	// Sends says what the request carries for sticky: see Sends.
	Sends Sends `json:"sends"`
	// PauseBeforeMS is a pause before the request is sent (session expiry).
	PauseBeforeMS int `json:"pause_before_ms,omitempty"`
	// Held requests stay in flight at their backend until released just
	// before the request whose ReleaseBefore names them; their Answer is
	// the one that came back then.
	Held          bool  `json:"held,omitempty"`
	ReleaseBefore []int `json:"release_before,omitempty"`
	Answer        Reply `json:"answer"`
}

// Sends is what a request carries for sticky. Kind is one of
//
//	none     no sticky value
//	server   the id of Servers[Server] (md5 of its address, or its route)
//	stale    the md5 of Value, an address that is not in the upstream
//	garbage  Value, which is no server's id
//	empty    the cookie or source present with an empty value
//	session  sticky learn's session id Value (lookup)
type Sends struct {
	Kind   string `json:"kind"`
	Server *int   `json:"server,omitempty"`
	Value  string `json:"value,omitempty"`
	// Creates is the session id the backend sets in its own Set-Cookie
	// (sticky learn's create=), asked for by the request's set= argument.
	Creates string `json:"creates,omitempty"`
}

// Reply is nginx's answer to one request.
type Reply struct {
	Status int `json:"status"`
	// Backend is the address that answered (the backend's body), "" when
	// nginx answered itself; Server is its position in Servers, or -1.
	Backend string `json:"backend"`
	Server  int    `json:"server"`
	// UpstreamAddr is $upstream_addr: every address nginx tried, in order.
	UpstreamAddr string `json:"upstream_addr"`
	// SetCookie is every Set-Cookie header of the answer, in order.
	SetCookie []string `json:"set_cookie"`
	Date      string   `json:"date"`
}

// SID is nginx's id of a server: its route= value, or the hex MD5 of
// its address as nginx prints it.
func SID(s Server) string {
	if s.Route != "" {
		return s.Route
	}
	return MD5Hex(s.Address)
}

// MD5Hex is the lower-case hex MD5 of s: nginx's id of a server without route=.
func MD5Hex(s string) string {
	sum := md5.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}
