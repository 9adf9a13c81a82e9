package sticky

import (
	"net/http"
	"time"
)

// Rule is one sticky directive as a host applies it to requests: nginx's
// `sticky cookie` (Cookie), `sticky route` (Route) or `sticky learn`
// (Lookup and Create). Exactly one mode is set; both hosts build their Rule
// from their own configuration with this package's parsers.
type Rule struct {
	// Cookie is the cookie of `sticky cookie`; nil in the other modes.
	Cookie *Cookie
	// Route lists where `sticky route` reads a request's route.
	Route []Source
	// Lookup lists where `sticky learn` reads the session a request
	// names, and Create where it reads the session an answer creates.
	Lookup, Create []Source
}

// RequestID returns the sticky id request r carries under rule, for
// core.Filter.Sticky ("" for none): the cookie's value, the route, or under
// learn the id of the server that the session r names is bound to in
// sessions at now (none while sessions is nil). It also returns that
// session, "" in the other modes, for the learning at the request's end.
func RequestID(rule *Rule, r *http.Request, sessions *Sessions, now time.Time) (id, session string) {
	if rule.Cookie != nil {
		return RequestCookie(r.Header, rule.Cookie.Name), ""
	}
	if rule.Lookup == nil {
		return First(rule.Route, r, nil), ""
	}
	session = First(rule.Lookup, r, nil)
	if session == "" || sessions == nil {
		return "", session
	}
	return sessions.Lookup(session, now), session
}
