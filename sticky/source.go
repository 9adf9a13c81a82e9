package sticky

import (
	"fmt"
	"net/http"
	"strings"
)

// Source is where `sticky route` and `sticky learn` read a value, one of
// nginx's variables:
//
//	query:NAME            $arg_NAME, the query argument as sent (not decoded)
//	cookie:NAME           $cookie_NAME, the request's cookie
//	header:NAME           $http_NAME, the request's header
//	upstream_cookie:NAME  $upstream_cookie_NAME, the cookie the answer sets
//	upstream_header:NAME  $upstream_http_NAME, the answer's header
type Source struct {
	kind string
	name string
}

// The kinds of Source, as written.
const (
	fromQuery          = "query"
	fromCookie         = "cookie"
	fromHeader         = "header"
	fromUpstreamCookie = "upstream_cookie"
	fromUpstreamHeader = "upstream_header"
)

// ParseSource reads a Source written as KIND:NAME.
func ParseSource(s string) (Source, error) {
	kind, name, ok := strings.Cut(s, ":")
	if !ok || name == "" {
		return Source{}, fmt.Errorf("sticky source %q: want query:NAME, cookie:NAME, header:NAME, upstream_cookie:NAME or upstream_header:NAME", s)
	}
	switch kind {
	case fromQuery, fromCookie, fromHeader, fromUpstreamCookie, fromUpstreamHeader:
	default:
		return Source{}, fmt.Errorf("sticky source %q: unknown kind %q (want query, cookie, header, upstream_cookie or upstream_header)", s, kind)
	}
	if i := strings.IndexFunc(name, notToken); i >= 0 {
		return Source{}, fmt.Errorf("sticky source %q: the name may not hold %q", s, name[i])
	}
	return Source{kind: kind, name: name}, nil
}

// ParseSources reads a list of sources for a host's setting; upstream
// says whether sources of the upstream's answer may be in it (sticky
// learn's create). On an error it returns the position of the entry at
// fault, and an error that quotes the entry and says what the list takes,
// for the host to prefix with the setting's name.
func ParseSources(list []string, upstream bool) ([]Source, int, error) {
	want := "query:NAME, cookie:NAME or header:NAME"
	if upstream {
		want = "query:NAME, cookie:NAME, header:NAME, upstream_cookie:NAME or upstream_header:NAME"
	}
	out := make([]Source, 0, len(list))
	for k, v := range list {
		src, err := ParseSource(strings.TrimSpace(v))
		if err != nil {
			return nil, k, fmt.Errorf("%q: want %s", v, want)
		}
		if src.Upstream() && !upstream {
			return nil, k, fmt.Errorf("%q: the upstream's answer cannot name the request's backend; want %s", v, want)
		}
		out = append(out, src)
	}
	return out, -1, nil
}

// String returns the source as ParseSource reads it.
func (s Source) String() string { return s.kind + ":" + s.name }

// Upstream reports whether the source reads the upstream's answer (sticky
// learn's create), not the request.
func (s Source) Upstream() bool {
	return s.kind == fromUpstreamCookie || s.kind == fromUpstreamHeader
}

// Value returns the source's value in request r or, for an upstream
// source, in the answer's header h (nil: no answer yet); "" when absent.
func (s Source) Value(r *http.Request, h http.Header) string {
	switch s.kind {
	case fromQuery:
		return QueryArg(r.URL.RawQuery, s.name)
	case fromCookie:
		return RequestCookie(r.Header, s.name)
	case fromHeader:
		return strings.Join(r.Header.Values(s.name), ", ")
	case fromUpstreamCookie:
		return SetCookieValue(h, s.name)
	case fromUpstreamHeader:
		return strings.Join(h.Values(s.name), ", ")
	}
	return ""
}

// First returns the first non-empty value among srcs, as nginx takes the
// first variable that is found and not empty.
func First(srcs []Source, r *http.Request, h http.Header) string {
	for _, s := range srcs {
		if v := s.Value(r, h); v != "" {
			return v
		}
	}
	return ""
}

// QueryArg is nginx's $arg_NAME over a raw query: the first argument whose
// name is name in any case, as sent (not percent-decoded).
func QueryArg(raw, name string) string {
	for raw != "" {
		var arg string
		arg, raw, _ = strings.Cut(raw, "&")
		if len(arg) > len(name) && arg[len(name)] == '=' && strings.EqualFold(arg[:len(name)], name) {
			return arg[len(name)+1:]
		}
	}
	return ""
}

// RequestCookie is nginx's $cookie_NAME: the first cookie named name, in
// any case, over every Cookie header in order; the value is what follows
// '=' (spaces skipped) up to ';', quotes and all.
func RequestCookie(h http.Header, name string) string {
	for _, line := range h["Cookie"] {
		for line != "" {
			var pair string
			pair, line, _ = strings.Cut(line, ";")
			line = strings.TrimLeft(line, " ")
			if v, ok := cookieValue(pair, name); ok {
				return v
			}
		}
	}
	return ""
}

// SetCookieValue is nginx's $upstream_cookie_NAME: the value of the first
// Set-Cookie header in h that sets name, in any case.
func SetCookieValue(h http.Header, name string) string {
	for _, line := range h["Set-Cookie"] {
		pair, _, _ := strings.Cut(line, ";")
		if v, ok := cookieValue(pair, name); ok {
			return v
		}
	}
	return ""
}

// cookieValue reads pair as nginx does for a cookie name: the name in any
// case, spaces, '=', spaces, and the value.
func cookieValue(pair, name string) (string, bool) {
	if len(pair) < len(name) || !strings.EqualFold(pair[:len(name)], name) {
		return "", false
	}
	rest := strings.TrimLeft(pair[len(name):], " ")
	if rest == "" || rest[0] != '=' {
		return "", false
	}
	return strings.TrimLeft(rest[1:], " "), true
}
