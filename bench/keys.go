package bench

import (
	"fmt"
	"net/http"
)

// numKeys is the size of the key sets the pickers cycle through; a power of
// two so that benchmarks index them with a mask.
const numKeys = 4096

// Addrs returns n distinct backend addresses in configuration order.
func Addrs(n int) []string {
	a := make([]string, n)
	for i := range a {
		a[i] = fmt.Sprintf("10.%d.%d.%d:8080", 1+i/62500, (i/250)%250, 1+i%250)
	}
	return a
}

// Weights returns the weight set used for weighted strategies at n backends:
// 1 to 5, repeating, so that the period of a smooth schedule grows with n.
func Weights(n int) []int {
	w := make([]int, n)
	for i := range w {
		w[i] = 1 + i%5
	}
	return w
}

// URLKeys returns count request URIs of about 32 bytes, the key url_hash and
// Caddy's uri_hash hash.
func URLKeys(count int) []string {
	k := make([]string, count)
	for i := range k {
		k[i] = fmt.Sprintf("/static/img/%08x/p%07d.jpg", uint32(i)*2654435761, i)
	}
	return k
}

// ClientIPs returns count distinct client addresses, IPv4 spread over many
// /24 networks (nginx's ip_hash uses the first three octets) with some IPv6.
func ClientIPs(count int) []string {
	k := make([]string, count)
	for i := range k {
		x := uint64(i+1) * 0x9e3779b97f4a7c15 // spreads consecutive i over the address space
		if i%8 == 7 {
			k[i] = fmt.Sprintf("2a%02x:%x:%x:%x:%x::%x", x>>56, (x>>40)&0xffff, (x>>24)&0xffff, (x>>8)&0xffff, x&0xff, i&0xffff)
		} else {
			k[i] = fmt.Sprintf("%d.%d.%d.%d", 1+(x>>56)%223, (x>>48)&255, (x>>40)&255, i&255)
		}
	}
	return k
}

// requests builds one *http.Request per key for Caddy's Select, which reads
// RequestURI (uri_hash) and RemoteAddr (ip_hash).
func requests(urls, ips []string) []*http.Request {
	r := make([]*http.Request, len(urls))
	for i := range r {
		host := ips[i%len(ips)]
		if len(host) > 0 && containsColon(host) {
			host = "[" + host + "]"
		}
		r[i] = &http.Request{Method: http.MethodGet, RequestURI: urls[i], RemoteAddr: host + ":40000"}
	}
	return r
}

func containsColon(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == ':' {
			return true
		}
	}
	return false
}
