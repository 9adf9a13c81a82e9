package traefikplugin

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// The keys of each level of the configuration, as a user writes them in
// Traefik's dynamic configuration (TestKnownKeys checks them against the
// structs' fields).
var (
	configKeys = []string{"strategy", "servers", "hashKey", "hashMode", "loadFactor", "stagger",
		"twoChoices", "decayTime", "maxFails", "failTimeout", "slowStart", "failStatus", "retries", "maxRetryBody",
		"connectTimeout", "responseTimeout", "healthCheck", "passHostHeader", "tls", "flushInterval", "trustedIPs", "mode", "cookie", "cookieFormat", "readAnswers", "sticky"}
	serverKeys = []string{"url", "weight", "backup", "down", "maxConns", "route", "drain"}
	healthKeys = []string{"path", "interval", "unhealthyInterval", "timeout", "method", "status", "hostname",
		"headers", "port", "scheme", "followRedirects", "mode"}
	tlsKeys    = []string{"serverName", "insecureSkipVerify", "rootCAs", "certFile", "keyFile"}
	stickyKeys = []string{"cookie", "route", "learn"}
	cookieKeys = []string{"name", "maxAge", "expires", "domain", "path", "httpOnly", "secure", "sameSite", "value", "secret"}
	learnKeys  = []string{"create", "lookup", "timeout", "header", "maxSessions"}
)

// unknownKeys refuses the first key, in each level's sorted order, that
// Traefik's decoder left over because it names no setting.
func unknownKeys(c *Config) error {
	if err := unknownKey("", c.Unknown, configKeys); err != nil {
		return err
	}
	if err := unknownKey("healthCheck.", c.HealthCheck.Unknown, healthKeys); err != nil {
		return err
	}
	if err := unknownKey("tls.", c.TLS.Unknown, tlsKeys); err != nil {
		return err
	}
	if err := unknownKey("sticky.", c.Sticky.Unknown, stickyKeys); err != nil {
		return err
	}
	if err := unknownKey("sticky.cookie.", c.Sticky.Cookie.Unknown, cookieKeys); err != nil {
		return err
	}
	if err := unknownKey("sticky.learn.", c.Sticky.Learn.Unknown, learnKeys); err != nil {
		return err
	}
	for i, sv := range c.Servers {
		if err := unknownKey(fmt.Sprintf("servers[%d].", i), sv.Unknown, serverKeys); err != nil {
			return err
		}
	}
	return nil
}

// unknownKey reports the first of left's keys, with where (the path of its
// level) in front, and the known key nearest to it.
func unknownKey(where string, left map[string]interface{}, known []string) error {
	if len(left) == 0 {
		return nil
	}
	keys := make([]string, 0, len(left))
	for k := range left {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	k := keys[0]
	if near := nearest(k, known); near != "" {
		return fmt.Errorf("%s%s: unknown key (did you mean %s?)", where, k, near)
	}
	return fmt.Errorf("%s%s: unknown key (known keys: %s)", where, k, strings.Join(known, ", "))
}

// nearest returns the known key closest to key in edit distance, ignoring
// case, '_' and '-' (so max_fails finds maxFails), when it is close enough
// to be a slip: at most 2 edits, or a third of the key's length.
func nearest(key string, known []string) string {
	k := fold(key)
	best, bestD := "", -1
	for _, c := range known {
		d := editDistance(k, fold(c))
		if bestD < 0 || d < bestD {
			best, bestD = c, d
		}
	}
	if bestD <= 2 || bestD <= len(k)/3 {
		return best
	}
	return ""
}

func fold(s string) string {
	return strings.NewReplacer("_", "", "-", "").Replace(strings.ToLower(s))
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			d := prev[j-1]
			if a[i-1] != b[j-1] {
				d++
			}
			if prev[j]+1 < d {
				d = prev[j] + 1
			}
			if cur[j-1]+1 < d {
				d = cur[j-1] + 1
			}
			cur[j] = d
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// coreFields turns the field names core's errors start with into the
// plugin's own.
var coreFields = strings.NewReplacer(
	"backends", "servers",
	".address", ".url",
	"hash_mode", "hashMode",
	"load_factor", "loadFactor",
	"two_choices", "twoChoices",
	"decay_time", "decayTime",
	"max_conns", "maxConns",
	"max_fails", "maxFails",
	"fail_timeout", "failTimeout",
	"slow_start", "slowStart",
)

// coreError is an error of core's in the plugin's words: without core's
// prefix, the field it starts with named as the user wrote it (what
// follows, the user's value among it, stays as it is).
func coreError(err error) error {
	msg := strings.TrimPrefix(err.Error(), "lbpack: ")
	field, rest := msg, ""
	if i := strings.IndexAny(msg, " :"); i >= 0 {
		field, rest = msg[:i], msg[i:]
	}
	rest = strings.Replace(rest, "backup backends", "backup servers", 1)
	return errors.New(coreFields.Replace(field) + rest)
}
