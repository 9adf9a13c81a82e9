package sticky

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ExpiresMax is Cookie.MaxAge for nginx's expires=max: the cookie is
// written with nginx's fixed far date and ten years of max-age. (It is
// also the number nginx keeps for max, so expires=2145916555 reads the
// same.)
const ExpiresMax int64 = 2145916555

// Cookie is nginx's `sticky cookie NAME [expires=] [domain=] [path=]
// [httponly] [secure] [samesite=]`: the cookie that names, in every answer,
// the server that gave it.
type Cookie struct {
	// Name is the cookie's name (nginx's NAME); the request's cookie of
	// that name, in any case, is the id it carries.
	Name string
	// MaxAge is expires= in seconds: 0 writes neither expires nor max-age
	// (a session cookie); above 0, expires at now plus MaxAge and
	// max-age=MaxAge; below 0, nginx's expires=0 (expires now,
	// max-age=0); ExpiresMax, nginx's expires=max.
	MaxAge int64
	// Domain and Path are written as given when not empty.
	Domain string
	Path   string
	// HTTPOnly and Secure add the flags.
	HTTPOnly bool
	Secure   bool
	// SameSite is "" or strict, lax or none in any case, written as
	// given.
	SameSite string
}

// Validate reports the first attribute of c a browser or nginx would not
// take, naming it as `sticky cookie` does.
func (c *Cookie) Validate() error {
	if c.Name == "" {
		return errors.New("sticky cookie: empty cookie name")
	}
	if i := strings.IndexFunc(c.Name, notToken); i >= 0 {
		return fmt.Errorf("sticky cookie %q: the name may not hold %q", c.Name, c.Name[i])
	}
	if c.SameSite != "" && !sameSite(c.SameSite) {
		return fmt.Errorf("sticky cookie samesite %q: want strict, lax or none", c.SameSite)
	}
	for _, a := range []struct{ name, value string }{{"domain", c.Domain}, {"path", c.Path}} {
		if strings.ContainsAny(a.value, ";\r\n") {
			return fmt.Errorf("sticky cookie %s %q: may not hold ';' or a line break", a.name, a.value)
		}
	}
	return nil
}

// sameSite reports whether v is one of SameSite's values, in any case.
func sameSite(v string) bool {
	return strings.EqualFold(v, "strict") || strings.EqualFold(v, "lax") || strings.EqualFold(v, "none")
}

// notToken reports a rune that an HTTP token (a cookie's name) may not hold.
func notToken(r rune) bool {
	if r <= ' ' || r >= 0x7f {
		return true
	}
	return strings.ContainsRune("()<>@,;:\\\"/[]?={}", r)
}

// Header returns the Set-Cookie header's value naming a server by value,
// as nginx writes it at time now: name=value, then expires and max-age,
// domain, httponly, secure, samesite and path, in that order whatever the
// configuration's.
func (c *Cookie) Header(value string, now time.Time) string {
	var b strings.Builder
	b.Grow(len(c.Name) + len(value) + 96)
	b.WriteString(c.Name)
	b.WriteByte('=')
	b.WriteString(value)
	switch {
	case c.MaxAge == ExpiresMax:
		b.WriteString("; expires=Thu, 31-Dec-37 23:55:55 GMT; max-age=315360000")
	case c.MaxAge != 0:
		age := c.MaxAge
		if age < 0 {
			age = 0
		}
		b.WriteString("; expires=")
		b.WriteString(CookieTime(time.Unix(now.Unix()+age, 0)))
		b.WriteString("; max-age=")
		b.WriteString(strconv.FormatInt(age, 10))
	}
	if c.Domain != "" {
		b.WriteString("; domain=")
		b.WriteString(c.Domain)
	}
	if c.HTTPOnly {
		b.WriteString("; httponly")
	}
	if c.Secure {
		b.WriteString("; secure")
	}
	if c.SameSite != "" {
		b.WriteString("; samesite=")
		b.WriteString(c.SameSite)
	}
	if c.Path != "" {
		b.WriteString("; path=")
		b.WriteString(c.Path)
	}
	return b.String()
}

var (
	weekDays = [7]string{"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"}
	months   = [12]string{"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"}
)

// CookieTime writes t as nginx's cookies carry dates: "Wed, 02-Dec-26
// 00:04:52 GMT", with dashes and a two-digit year up to 2037 (a four-digit
// one after), in UTC. It is not http.TimeFormat.
func CookieTime(t time.Time) string {
	t = t.UTC()
	year := t.Year()
	y := strconv.Itoa(year)
	if year <= 2037 {
		y = two(year % 100)
	}
	h, m, s := t.Clock()
	return weekDays[t.Weekday()] + ", " + two(t.Day()) + "-" + months[t.Month()-1] + "-" + y +
		" " + two(h) + ":" + two(m) + ":" + two(s) + " GMT"
}

// two writes n, from 0 to 99, in two digits.
func two(n int) string {
	return string([]byte{byte('0' + n/10), byte('0' + n%10)})
}

// ParseExpires reads nginx's expires= value: "max" (ExpiresMax), or a time
// in seconds by nginx's rules (ngx_parse_time): a number, or numbers each
// with a unit among y M w d h m s, largest first, each unit once ("1d12h");
// a number without a unit counts seconds. The error says nginx's words.
func ParseExpires(s string) (int64, error) {
	if s == "max" {
		return ExpiresMax, nil
	}
	n, ok := parseSeconds(s)
	if !ok {
		return 0, errors.New(`invalid "expires" parameter value`)
	}
	return n, nil
}

// units are ngx_parse_time's units in seconds, largest first.
var units = []struct {
	unit  byte
	scale int64
}{{'y', 365 * 86400}, {'M', 30 * 86400}, {'w', 7 * 86400}, {'d', 86400}, {'h', 3600}, {'m', 60}, {'s', 1}}

// parseSeconds is ngx_parse_time(s, 1): seconds, with the same overflow
// limits (a 64-bit time).
func parseSeconds(s string) (int64, bool) {
	const maxInt = int64(^uint64(0) >> 1)
	var value, total int64
	valid, step := false, -1
	for i := 0; i < len(s); {
		c := s[i]
		i++
		if c >= '0' && c <= '9' {
			if value > (maxInt-int64(c-'0'))/10 {
				return 0, false
			}
			value = value*10 + int64(c-'0')
			valid = true
			continue
		}
		scale, at := int64(0), -1
		for k, u := range units {
			if u.unit == c {
				scale, at = u.scale, k
			}
		}
		if c == ' ' && step < len(units)-1 {
			scale, at = 1, len(units) // nginx's st_last: seconds without a unit, then a space
		}
		if at < 0 || at <= step || c == 'm' && i < len(s) && s[i] == 's' {
			return 0, false // unknown, out of order, repeated, or ms
		}
		step = at
		if value > maxInt/scale {
			return 0, false
		}
		value *= scale
		if total > maxInt-value {
			return 0, false
		}
		total += value
		value = 0
		for i < len(s) && s[i] == ' ' {
			i++
		}
	}
	if !valid || total > maxInt-value {
		return 0, false
	}
	return total + value, true
}

// ParseCookie reads the parameters of nginx's `sticky cookie NAME ...`
// after the name: expires=, domain=, path=, httponly, secure, samesite=.
// Its errors are nginx's own words ("parameter \"path\" is duplicate",
// "unknown parameter \"max-age=10\"", ...), for the caller to prefix with
// where the directive is. Values holding nginx variables ('$') are
// refused: lbpack writes constant attributes only.
func ParseCookie(name string, params []string) (Cookie, error) {
	c := Cookie{Name: name}
	if name == "" {
		return c, errors.New("empty cookie name")
	}
	seen := map[string]bool{}
	for _, p := range params {
		key, value, hasValue := strings.Cut(p, "=")
		if !hasValue && key != "httponly" && key != "secure" || hasValue && (key == "httponly" || key == "secure") {
			return c, fmt.Errorf("unknown parameter %q", p)
		}
		switch key {
		case "domain", "path", "expires", "httponly", "secure", "samesite":
		default:
			return c, fmt.Errorf("unknown parameter %q", p)
		}
		if seen[key] {
			return c, fmt.Errorf("parameter %q is duplicate", key)
		}
		seen[key] = true
		if (key == "domain" || key == "path") && value == "" {
			return c, fmt.Errorf("no value for %q", key)
		}
		if strings.Contains(value, "$") && key != "expires" {
			return c, fmt.Errorf("%s=%s: a value from a variable is not supported", key, value)
		}
		var err error
		switch key {
		case "domain":
			c.Domain = value
		case "path":
			c.Path = value
		case "expires":
			c.MaxAge, err = ParseExpires(value)
			if err == nil && c.MaxAge == 0 {
				c.MaxAge = -1 // expires=0: expires now
			}
		case "httponly":
			c.HTTPOnly = true
		case "secure":
			c.Secure = true
		case "samesite":
			if !sameSite(value) {
				err = errors.New(`invalid "samesite" parameter value`)
			}
			c.SameSite = value
		}
		if err != nil {
			return c, err
		}
	}
	return c, nil
}
