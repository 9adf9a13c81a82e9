package nginxconf

import (
	"testing"
	"testing/fstest"
)

// FuzzConvert: no input makes the parser, the loader or the converters
// panic; whatever parses and loads converts for both hosts.
func FuzzConvert(f *testing.F) {
	for _, seed := range []string{
		site("upstream u { server 10.0.0.1:80 weight=5; server [::1]:81 backup; }"),
		site("upstream u { hash \"$arg_k/${http_x}x\" consistent; server 10.0.0.1; server 10.0.0.2 down; }"),
		"http { server { listen 127.0.0.1:8080 ssl; server_name .a.example ~re; location ~* \\.x$ { proxy_pass https://10.0.0.1:8443/p; } location = /r { return 301 $scheme://h$request_uri; } } }",
		"http { include x; }", "events { } http { upstream u { random two least_time=header; server a:1; } server { location / { proxy_pass http://u; } } }",
		site("upstream u { sticky cookie s expires=1d domain=.a path=/ httponly secure samesite=Lax; server 10.0.0.1 route=r drain; server a:1 down drain; }"),
		site("upstream u { hash $arg_k; sticky route $arg_r $cookie_r $http_x_r; server 10.0.0.1; }"),
		site("upstream u { sticky learn create=$upstream_cookie_s create=$upstream_http_x lookup=$cookie_s zone=z:32k timeout=1s header; server 10.0.0.1; }"),
		"'\\", "\"${", "a {", "}", "http { real_ip_header X-Forwarded-For; set_real_ip_from ::/0; }",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, conf string) {
		ds, err := ParseFS(fstest.MapFS{"nginx.conf": {Data: []byte(conf)}, "x": {Data: []byte(conf)}}, "nginx.conf")
		if err != nil {
			return
		}
		cfg, err := Load(ds)
		if err != nil {
			return
		}
		cfg.Caddyfile()
		cfg.Traefik()
	})
}
