package nginxconf

import (
	"strings"
	"testing"
)

// TestUnixListen: a server nginx serves on a unix socket only is refused,
// never turned into a site on port 80 of every interface; one that also
// listens on TCP keeps that listen alone.
func TestUnixListen(t *testing.T) {
	_, err := load(t, "http {\nupstream u { server 10.0.0.1:80; }\nserver {\n listen unix:/run/admin.sock;\n location / { proxy_pass http://u; }\n}\n}\n")
	want := "nginx.conf:4: listen unix:/run/admin.sock: this server listens on unix sockets only"
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("error %v, want %s", err, want)
	}

	cfg, err := load(t, "http {\nupstream u { server 10.0.0.1:80; }\nserver {\n listen unix:/run/admin.sock;\n listen 127.0.0.1:8081;\n location / { proxy_pass http://u; }\n}\n}\n")
	if err != nil {
		t.Fatal(err)
	}
	caddy, _ := cfg.Caddyfile()
	if !strings.Contains(string(caddy), "http://:8081 {\n\tbind 127.0.0.1\n") || strings.Contains(string(caddy), "http://:80 ") {
		t.Errorf("Caddyfile:\n%s", caddy)
	}
	traefik, _ := cfg.Traefik()
	if !strings.Contains(string(traefik), `address: "127.0.0.1:8081"`) || strings.Contains(string(traefik), "port80:") {
		t.Errorf("Traefik:\n%s", traefik)
	}
}
