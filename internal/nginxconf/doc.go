// Package nginxconf reads an nginx configuration and converts its load
// balancing to lbpack's Caddy policies (a Caddyfile) or to the lbpack Traefik
// plugin (Traefik dynamic configuration), keeping nginx's choices: the same
// backend for the same request.
//
// ParseFile reads the file and its includes (relative to the main file's
// directory, as nginx resolves them) into directives with their file:line;
// Load turns the http, server, location and upstream blocks into a Config;
// Caddyfile and Traefik print it for one host. What a host cannot carry over
// is a Warning naming the directive and where it was written; bad input (not
// nginx syntax, an upstream no proxy_pass uses, an unknown variable) is an
// *Error with the same position.
//
// The package uses the standard library only, so that the yaegi test
// module can call it without Caddy's dependencies.
package nginxconf
