package faultsuite

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"time"
)

// TCP states in /proc/net/tcp that are not a live connection.
const (
	tcpTimeWait = 0x06
	tcpListen   = 0x0A
)

// Sockets counts the TCP connections on this host, of any process, with
// either end on one of ports, that are neither listening nor in TIME_WAIT:
// the connections some program still holds. It waits up to 3 s for the
// count to reach 0 (closing takes a few round trips) and returns the last.
func Sockets(ports []int) (int, error) {
	n, err := countSockets(ports)
	for k := 0; k < 60 && err == nil && n > 0; k++ {
		time.Sleep(50 * time.Millisecond)
		n, err = countSockets(ports)
	}
	return n, err
}

func countSockets(ports []int) (int, error) {
	want := make(map[int]bool, len(ports))
	for _, p := range ports {
		want[p] = true
	}
	n := 0
	for _, name := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(name)
		if err != nil {
			if os.IsNotExist(err) && name == "/proc/net/tcp6" {
				continue
			}
			return 0, err
		}
		c, err := countIn(bufio.NewScanner(f), want)
		f.Close()
		if err != nil {
			return 0, err
		}
		n += c
	}
	return n, nil
}

// countIn counts the lines of a /proc/net/tcp table that match.
func countIn(sc *bufio.Scanner, want map[int]bool) (int, error) {
	n := 0
	for first := true; sc.Scan(); first = false {
		f := strings.Fields(sc.Text())
		if first || len(f) < 4 {
			continue // the header
		}
		st, err := strconv.ParseUint(f[3], 16, 8)
		if err != nil || st == tcpListen || st == tcpTimeWait {
			continue
		}
		if want[port(f[1])] || want[port(f[2])] {
			n++
		}
	}
	return n, sc.Err()
}

// port reads the port of a "HEXADDR:HEXPORT" field.
func port(field string) int {
	k := strings.LastIndexByte(field, ':')
	if k < 0 {
		return -1
	}
	p, err := strconv.ParseUint(field[k+1:], 16, 16)
	if err != nil {
		return -1
	}
	return int(p)
}
