package yaegitest

import (
	"fmt"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/lbpack/lbpack/core"
)

// spellings returns ways a proxy may write address a in X-Forwarded-For:
// every group written out in full, in capitals and not, with a port, and
// for an IPv4-mapped address its last 32 bits in hex.
func spellings(a netip.Addr) []string {
	b := a.As16()
	var groups []string
	for k := 0; k < 16; k += 2 {
		groups = append(groups, fmt.Sprintf("%02x%02x", b[k], b[k+1]))
	}
	full := strings.Join(groups, ":")
	out := []string{a.String(), full, strings.ToUpper(full), "[" + full + "]:4711"}
	if a.Is4In6() {
		out = append(out, fmt.Sprintf("::FFFF:%x:%x", int(b[12])<<8|int(b[13]), int(b[14])<<8|int(b[15])))
	}
	return out
}

// TestPluginClientAddrForms: under the loader, every spelling of one client
// address in X-Forwarded-For goes to the server compiled core picks for the
// address as nginx writes it ($remote_addr: lower case, zeros compressed), under url_hash's clientip key (nginx's hash $remote_addr, which
// hashes that text) and under ip_hash (which hashes the address's bytes).
func TestPluginClientAddrForms(t *testing.T) {
	l := loadPlugin(t, nil)
	addrs := []string{"2001:db8:85a3::8a2e:370:7334", "2001:db8::1", "::ffff:198.51.100.7", "fe80::1", "::192.0.2.1", "2001:db8:0:1:0:0:0:9"}
	for _, c := range []struct{ strategy, extra string }{
		{core.IPHash, ""},
		{core.URLHash, "hashKey: clientip\n"},
		{core.URLHash, "hashKey: clientip\nhashMode: modulo\n"},
	} {
		cfg := core.Config{Strategy: c.strategy}
		if strings.Contains(c.extra, "modulo") {
			cfg.HashMode = core.HashModulo
		}
		bs, urls, ref := threeWithReference(t, cfg)
		h := plugin(t, l, "strategy: "+c.strategy+"\n"+c.extra+"trustedIPs: 10.0.0.0/8\n"+serversYAML(urls))
		for _, text := range addrs {
			a := netip.MustParseAddr(text)
			key := strings.Replace(a.String(), "::c000:201", "::192.0.2.1", 1) // nginx dots an IPv4-compatible address
			want, _ := core.Pick(ref, key, core.Filter{})                      // a hash strategy: nothing to end
			for _, form := range spellings(a) {
				req := httptest.NewRequest("GET", "/", nil)
				req.RemoteAddr = "10.1.2.3:5000"
				req.Header.Set("X-Forwarded-For", form)
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if got := rec.Header().Get("X-Backend"); got != bs[want].name {
					t.Errorf("%s %s: X-Forwarded-For %s went to %q, want %q (core's pick for %s)", c.strategy, c.extra, form, got, bs[want].name, key)
				}
			}
		}
	}
}
