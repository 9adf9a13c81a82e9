package core_test

import (
	"fmt"

	"github.com/lbpack/lbpack/core"
)

// url_hash's ketama mode maps keys as nginx's "hash $arg_k consistent" does:
// these are the servers nginx 1.22 chose for the same upstream.
func ExampleNew_urlHashKetama() {
	b, err := core.New(core.Config{
		Strategy: core.URLHash,
		HashMode: core.HashKetama,
		Backends: []core.Backend{
			{Address: "127.0.0.1:19001", Weight: 1},
			{Address: "127.0.0.1:19002", Weight: 2},
			{Address: "127.0.0.1:19003", Weight: 1},
			{Address: "127.0.0.1:19004", Weight: 1},
			{Address: "127.0.0.1:19005", Weight: 1},
		},
	})
	if err != nil {
		panic(err)
	}
	for _, key := range []string{"a", "abc", "index.html", "k8s-pod-12"} {
		i, _ := core.Pick(b, key, core.Filter{})
		fmt.Println(key, "->", b.Backend(i).Address)
	}
	// Output:
	// a -> 127.0.0.1:19002
	// abc -> 127.0.0.1:19004
	// index.html -> 127.0.0.1:19005
	// k8s-pod-12 -> 127.0.0.1:19001
}

// ip_hash keeps a client on one backend, and an IPv4 client's whole /24 with
// it, as nginx's ip_hash does. A down backend keeps its place, so only its own
// clients move.
func ExampleNew_ipHash() {
	b, err := core.New(core.Config{
		Strategy: core.IPHash,
		Backends: []core.Backend{
			{Address: "127.0.0.1:19001", Weight: 1},
			{Address: "127.0.0.1:19002", Weight: 1, Down: true},
			{Address: "127.0.0.1:19003", Weight: 1},
			{Address: "127.0.0.1:19004", Weight: 1},
		},
	})
	if err != nil {
		panic(err)
	}
	for _, client := range []string{"192.0.2.1", "192.0.2.200", "2001:db8::1"} {
		i, _ := core.Pick(b, client, core.Filter{})
		fmt.Println(client, "->", b.Backend(i).Address)
	}
	// Output:
	// 192.0.2.1 -> 127.0.0.1:19004
	// 192.0.2.200 -> 127.0.0.1:19004
	// 2001:db8::1 -> 127.0.0.1:19001
}

// Bounded loads: a hot key stays on its backend while that backend holds
// less than ceil(1.25 * mean) of the requests in flight, then spills to the
// next backends on the ring (here 10.0.0.3, then 10.0.0.4 and 10.0.0.1).
func ExampleNew_urlHashBounded() {
	var backends []core.Backend
	for _, a := range []string{"10.0.0.1:80", "10.0.0.2:80", "10.0.0.3:80", "10.0.0.4:80"} {
		backends = append(backends, core.Backend{Address: a, Weight: 1})
	}
	b, err := core.New(core.Config{Strategy: core.URLHash, HashMode: core.HashBounded, Backends: backends})
	if err != nil {
		panic(err)
	}
	for r := 0; r < 8; r++ {
		core.Pick(b, "/hot/video.mp4", core.Filter{}) // in flight until Done
	}
	for i := 0; i < b.Len(); i++ {
		fmt.Println(b.Backend(i).Address, b.InFlight(i))
	}
	// Output:
	// 10.0.0.1:80 2
	// 10.0.0.2:80 0
	// 10.0.0.3:80 3
	// 10.0.0.4:80 3
}
