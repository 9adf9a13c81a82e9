package nginxconf

import (
	"regexp"
	"strings"
)

// variables are the nginx variables the converters translate, by name or
// by prefix (arg_, cookie_, http_).
var variables = map[string]bool{
	"request_uri": true, "uri": true, "document_uri": true, "args": true, "query_string": true,
	"remote_addr": true, "host": true, "request_method": true, "scheme": true,
	"remote_port": true, "upstream_addr": true, "proxy_add_x_forwarded_for": true,
}

var prefixedVariables = []string{"arg_", "cookie_", "http_"}

// parseKey splits a value with nginx variables ($name or ${name}) into
// literal text and variables; a variable the converters cannot translate is
// an error at pos.
func parseKey(s string, pos Pos) (Key, error) {
	k := Key{Text: s, Pos: pos}
	var lit strings.Builder
	for i := 0; i < len(s); {
		if s[i] != '$' {
			lit.WriteByte(s[i])
			i++
			continue
		}
		var name string
		if strings.HasPrefix(s[i+1:], "{") {
			end := strings.IndexByte(s[i:], '}')
			if end < 0 {
				return k, errorf(pos, "%q: unterminated ${", s)
			}
			name = s[i+2 : i+end]
			i += end + 1
		} else {
			j := i + 1
			for j < len(s) && isNameByte(s[j]) {
				j++
			}
			name = s[i+1 : j]
			i = j
		}
		if name == "" || !validName(name) {
			return k, errorf(pos, "%q: invalid variable name after $", s)
		}
		if !knownVariable(name) {
			return k, errorf(pos, "%q: unknown variable $%s (the converter translates $request_uri, $uri, $args, $arg_NAME, $cookie_NAME, $http_NAME, $remote_addr, $host, $request_method, $scheme)", s, name)
		}
		if lit.Len() > 0 {
			k.Parts = append(k.Parts, KeyPart{Literal: lit.String()})
			lit.Reset()
		}
		k.Parts = append(k.Parts, KeyPart{Var: name})
	}
	if lit.Len() > 0 {
		k.Parts = append(k.Parts, KeyPart{Literal: lit.String()})
	}
	return k, nil
}

func isNameByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func validName(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isNameByte(s[i]) {
			return false
		}
	}
	return true
}

func knownVariable(name string) bool {
	if variables[name] {
		return true
	}
	for _, p := range prefixedVariables {
		if strings.HasPrefix(name, p) && len(name) > len(p) {
			return true
		}
	}
	return false
}

// headerName turns the NAME of $http_NAME into the header it reads:
// underscores are dashes, and case does not matter.
func headerName(s string) string {
	parts := strings.Split(s, "_")
	for i, p := range parts {
		if p != "" {
			parts[i] = strings.ToUpper(p[:1]) + strings.ToLower(p[1:])
		}
	}
	return strings.Join(parts, "-")
}

// argMap is a Caddy map directive that extracts one raw query argument, as
// nginx's $arg_NAME has it: the first NAME= (name compared without case)
// at the start of the query or after "&", up to the next "&", not decoded.
// Caddy's {http.request.uri.query.NAME} is decoded, which hashes escaped
// keys differently.
type argMap struct {
	name string // NAME of $arg_NAME
}

func (a argMap) placeholder() string { return "{nginx.arg_" + a.name + "}" }

func (a argMap) regexp() string {
	return "~(?:^|&)(?i:" + regexp.QuoteMeta(a.name) + ")=([^&]*)"
}

// caddyKey translates k into a Caddy placeholder expression. Query
// arguments add an argMap to maps (once per name); warn receives what
// yields other bytes than nginx.
func caddyKey(k Key, maps *[]argMap, warn func(format string, args ...any)) string {
	var b strings.Builder
	for _, p := range k.Parts {
		if p.Var == "" {
			b.WriteString(strings.NewReplacer("{", `\{`, "}", `\}`).Replace(p.Literal))
			continue
		}
		v := p.Var
		switch {
		case v == "request_uri":
			b.WriteString("{http.request.orig_uri}")
		case v == "uri" || v == "document_uri":
			b.WriteString("{http.request.uri.path}")
			warn("$%s: Caddy's path is decoded like nginx's but not normalized (nginx merges // and resolves . and ..): such paths hash differently", v)
		case v == "args" || v == "query_string":
			b.WriteString("{http.request.uri.query}")
		case strings.HasPrefix(v, "arg_"):
			a := argMap{name: strings.TrimPrefix(v, "arg_")}
			have := false
			for _, m := range *maps {
				have = have || m == a
			}
			if !have {
				*maps = append(*maps, a)
			}
			b.WriteString(a.placeholder())
		case strings.HasPrefix(v, "cookie_"):
			b.WriteString("{http.request.cookie." + strings.TrimPrefix(v, "cookie_") + "}")
			warn("$%s: Caddy's cookie value drops surrounding double quotes and skips malformed cookies; nginx takes the raw text", v)
		case strings.HasPrefix(v, "http_"):
			b.WriteString("{http.request.header." + headerName(strings.TrimPrefix(v, "http_")) + "}")
		case v == "remote_addr":
			b.WriteString("{client_ip}")
		case v == "host":
			b.WriteString("{http.request.host}")
		case v == "request_method":
			b.WriteString("{http.request.method}")
		case v == "scheme":
			b.WriteString("{http.request.scheme}")
		case v == "remote_port":
			b.WriteString("{http.request.remote.port}")
		case v == "upstream_addr":
			b.WriteString("{http.reverse_proxy.upstream.hostport}")
		case v == "proxy_add_x_forwarded_for":
			b.WriteString("{http.request.header.X-Forwarded-For}")
			warn("$proxy_add_x_forwarded_for: Caddy appends the client address to X-Forwarded-For itself")
		}
	}
	return b.String()
}

// traefikKey translates a hash key into the plugin's hashKey, which names
// one value: uri, path, clientip, header:NAME, cookie:NAME or query:NAME.
// ok is false when the key has no equivalent; warn receives differences.
func traefikKey(k Key, warn func(format string, args ...any)) (string, bool) {
	if len(k.Parts) != 1 || k.Parts[0].Var == "" {
		return "", false
	}
	v := k.Parts[0].Var
	switch {
	case v == "request_uri":
		return "uri", true
	case v == "uri" || v == "document_uri":
		warn("$%s: the plugin hashes Go's decoded path, not normalized as nginx's (// and . or .. segments hash differently)", v)
		return "path", true
	case v == "remote_addr":
		return "clientip", true // the plugin writes the address as nginx does
	case strings.HasPrefix(v, "http_"):
		return "header:" + headerName(strings.TrimPrefix(v, "http_")), true
	case strings.HasPrefix(v, "cookie_"):
		return "cookie:" + strings.TrimPrefix(v, "cookie_"), true
	case strings.HasPrefix(v, "arg_"):
		warn("$%s: the plugin hashes the decoded argument, nginx the raw one, and the plugin takes the name in its case only: values with %%-escapes or +, or names in other case, map to other servers", v)
		return "query:" + strings.TrimPrefix(v, "arg_"), true
	}
	return "", false
}
