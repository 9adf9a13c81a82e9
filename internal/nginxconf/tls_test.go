package nginxconf

import (
	"strings"
	"testing"
)

// TestProxyTLS: an https proxy_pass keeps nginx's meaning: no certificate
// check unless proxy_ssl_verify is on (said in a warning), then a check
// against proxy_ssl_trusted_certificate's CAs and proxy_ssl_name; the
// client certificate too. The Traefik plugin has no TLS settings: each
// difference is a warning.
func TestProxyTLS(t *testing.T) {
	cases := []struct {
		name, http, loc string
		caddy           string   // the transport block
		caddyWarn       []string // Caddy's warnings, in order
		traefikWarn     []string // Traefik's TLS warnings, in order
	}{
		{"nginx's default: no check", "", "",
			"transport http {\n\t\t\t\ttls\n\t\t\t\t# proxy_ssl_verify off (nginx's default): the upstream's certificate is not checked\n\t\t\t\ttls_insecure_skip_verify\n\t\t\t}",
			[]string{"nginx.conf:3: proxy_pass: https://u: nginx does not check the upstream's certificate (proxy_ssl_verify off, its default), so Caddy is told not to either (tls_insecure_skip_verify); to check it, write proxy_ssl_verify on and proxy_ssl_trusted_certificate CA.pem (Caddy: tls_trust_pool file CA.pem)"},
			[]string{"nginx.conf:3: proxy_pass: https://u: nginx does not check the upstream's certificate (proxy_ssl_verify off, its default); the plugin checks it against the system's trusted roots and has no setting to skip it: a server with a self-signed or private CA's certificate fails (502) unless that CA is in the system's trust store and the certificate names the host of the server's URL"}},
		{"checked, by the http block's settings, with a client certificate", "proxy_ssl_verify on;\n proxy_ssl_trusted_certificate /etc/nginx/ca.pem;\n proxy_ssl_certificate /etc/nginx/c.pem;\n proxy_ssl_certificate_key /etc/nginx/c.key;\n", "",
			"transport http {\n\t\t\t\ttls\n\t\t\t\t# proxy_ssl_verify on: the certificate is checked against proxy_ssl_name, as nginx checks it\n\t\t\t\ttls_trust_pool file /etc/nginx/ca.pem\n\t\t\t\ttls_server_name u\n\t\t\t\ttls_client_auth /etc/nginx/c.pem /etc/nginx/c.key\n\t\t\t}",
			nil,
			[]string{"nginx.conf:3: proxy_ssl_trusted_certificate: /etc/nginx/ca.pem: not converted: the plugin trusts the system's roots only; add this CA to the system's trust store",
				"nginx.conf:4: proxy_ssl_certificate: /etc/nginx/c.pem: not converted: the plugin presents no client certificate",
				"nginx.conf:7: proxy_ssl_name: u: not converted: the plugin sends and checks the host of each server's URL as the TLS server name"}},
		{"a location's own name and SNI, not checked", "proxy_ssl_verify on;\n proxy_ssl_trusted_certificate /etc/nginx/ca.pem;\n", "proxy_ssl_verify off; proxy_ssl_server_name on; proxy_ssl_name $host;",
			"transport http {\n\t\t\t\ttls\n\t\t\t\t# proxy_ssl_verify off (nginx's default): the upstream's certificate is not checked\n\t\t\t\ttls_insecure_skip_verify\n\t\t\t\ttls_server_name {http.request.host}\n\t\t\t}",
			[]string{"nginx.conf:5: proxy_pass: https://u: nginx does not check"},
			[]string{"nginx.conf:5: proxy_pass: https://u: nginx does not check", "nginx.conf:5: proxy_ssl_name: $host: not converted"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			conf := "http {\n " + c.http + "upstream u { server 10.0.0.1:443; }\n server { listen 8080; location / { proxy_pass https://u; proxy_set_header Host $host; " + c.loc + " } }\n}\n"
			cfg, err := load(t, conf)
			if err != nil {
				t.Fatal(err)
			}
			out, cw := cfg.Caddyfile()
			if got := section(string(out), "transport http {"); got != "\t\t\t"+c.caddy {
				t.Errorf("Caddy transport:\n%s\nwant:\n\t\t\t%s", got, c.caddy)
			}
			_, tw := cfg.Traefik()
			for _, pair := range []struct {
				host string
				ws   []Warning
				want []string
			}{{"caddy", cw, c.caddyWarn}, {"traefik", tw, c.traefikWarn}} {
				var got []string
				for _, w := range pair.ws {
					if strings.HasPrefix(w.Directive, "proxy_ssl") || strings.Contains(w.Msg, "check the upstream's certificate") {
						got = append(got, w.String())
					}
				}
				if len(got) != len(pair.want) {
					t.Errorf("%s TLS warnings:\n%s\nwant %d:\n%s", pair.host, strings.Join(got, "\n"), len(pair.want), strings.Join(pair.want, "\n"))
					continue
				}
				for i := range got {
					if !strings.HasPrefix(got[i], pair.want[i]) {
						t.Errorf("%s warning %d:\n%s\nwant:\n%s", pair.host, i, got[i], pair.want[i])
					}
				}
			}
		})
	}

	for _, c := range []struct{ conf, want string }{
		{"http {\nserver { location / { proxy_ssl_verify on; proxy_pass https://10.0.0.1:443; } }\n}\n", "nginx.conf:2: proxy_ssl_verify on: no proxy_ssl_trusted_certificate (nginx refuses it too)"},
		{"http {\nserver { location / {\n proxy_ssl_certificate /c.pem; proxy_pass https://10.0.0.1:443; } }\n}\n", "nginx.conf:3: proxy_ssl_certificate /c.pem: no proxy_ssl_certificate_key (nginx refuses it too)"},
		{"http {\nserver { location / {\n proxy_ssl_verify maybe; proxy_pass https://10.0.0.1:443; } }\n}\n", "nginx.conf:3: proxy_ssl_verify: want on or off"},
	} {
		if _, err := load(t, c.conf); err == nil || err.Error() != c.want {
			t.Errorf("%s: error %v, want %s", c.conf, err, c.want)
		}
	}
	// nginx checks proxy_ssl_verify only where it proxies to https.
	if _, err := load(t, "http {\nserver { location / { proxy_ssl_verify on; proxy_pass http://10.0.0.1:80; } }\n}\n"); err != nil {
		t.Errorf("proxy_ssl_verify on over http: %v", err)
	}
}
