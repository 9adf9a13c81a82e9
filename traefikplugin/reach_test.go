package traefikplugin

import (
	"bytes"
	"log"
	"testing"
)

// TestWarnReach: New logs the servers a hash's first try never reaches,
// and nothing when the weights stay within the hash's range.
func TestWarnReach(t *testing.T) {
	var buf bytes.Buffer
	events.SetOutput(&buf)
	defer events.SetOutput(log.Writer())
	cases := []struct {
		strategy, mode string
		weights        []int
		want           string
	}{
		{"ip_hash", "", []int{5000, 3000, 2000}, `lbpack middleware "TestWarnReach": the weights add up to 10000, more than the hash reaches (6271, as in nginx): http://10.0.0.3:80 get a key only when an earlier choice is unavailable; weights that sum to at most 6271 reach every server` + "\n"},
		{"url_hash", "modulo", []int{50000, 30000, 20000}, `lbpack middleware "TestWarnReach": the weights add up to 100000, more than the hash reaches (32768, as in nginx): http://10.0.0.2:80, http://10.0.0.3:80 get a key only when an earlier choice is unavailable; weights that sum to at most 32768 reach every server` + "\n"},
		{"ip_hash", "", []int{5, 3, 2}, ""},
		{"url_hash", "maglev", []int{50000, 30000, 20000}, ""},
	}
	for _, c := range cases {
		buf.Reset()
		cfg := withServers(CreateConfig(), "http://10.0.0.1:80", "http://10.0.0.2:80", "http://10.0.0.3:80")
		cfg.Strategy, cfg.HashMode = c.strategy, c.mode
		for i, w := range c.weights {
			w := w
			cfg.Servers[i].Weight = &w
		}
		newPlugin(t, cfg)
		if got := buf.String(); got != c.want {
			t.Errorf("%s %s %v: logged %q, want %q", c.strategy, c.mode, c.weights, got, c.want)
		}
	}
}
