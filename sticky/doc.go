// Package sticky holds what both hosts need for nginx's sticky sessions
// (ngx_http_upstream_sticky_module) besides the binding itself, which is
// core's (core.Filter.Sticky): the cookie nginx's `sticky cookie` sets,
// byte for byte; where `sticky route` and `sticky learn` read their ids
// ($arg_, $cookie_, $http_, $upstream_cookie_, $upstream_http_); the
// session table of `sticky learn`; which id a request carries under each
// mode (Rule, RequestID); and the cookie values of Caddy's and Traefik's
// own affinity, for users who keep their clients' cookies.
//
// Like core, it uses the standard library only and runs unchanged under
// Traefik's interpreter.
package sticky
