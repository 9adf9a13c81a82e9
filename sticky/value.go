package sticky

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
)

// CaddyValue returns the value Caddy's own `lb_policy cookie` gives the
// upstream at dial with secret (the hex HMAC-SHA256 of the dial address),
// so that a policy replacing it recognises every client Caddy bound.
func CaddyValue(secret, dial string) string {
	h := hmac.New(sha256.New, []byte(secret))
	h.Write([]byte(dial))
	return hex.EncodeToString(h.Sum(nil))
}

// TraefikValue returns the value Traefik's sticky cookie gives a server
// since Traefik v3.3.4: the first 16 hex digits of the SHA-256 of the
// server's URL as configured.
func TraefikValue(url string) string {
	sum := sha256.Sum256([]byte(url))
	return hex.EncodeToString(sum[:8])
}

// SecretID returns an nginx-style id for the server at address that
// cannot be traced back to the address without secret: the first 32 hex
// digits of HMAC-SHA256(secret, address). (nginx's own id, the MD5 of the
// address, is found again by anyone who tries the addresses of a network.)
func SecretID(secret, address string) string {
	h := hmac.New(sha256.New, []byte(secret))
	h.Write([]byte(address))
	return hex.EncodeToString(h.Sum(nil)[:16])
}
