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

// Sockets counts the TCP connections held by the processes pids with
// either end on one of ports, neither listening nor in TIME_WAIT. The
// suite's ports lie in the range the system hands out to outgoing
// connections, so other programs' sockets may use them too: only sockets
// among the processes' open files count. It waits up to 3 s for the count
// to reach 0 (closing takes a few round trips) and returns the last.
func Sockets(ports, pids []int) (int, error) {
	n, err := countSockets(ports, pids)
	for k := 0; k < 60 && err == nil && n > 0; k++ {
		time.Sleep(50 * time.Millisecond)
		n, err = countSockets(ports, pids)
	}
	return n, err
}

func countSockets(ports, pids []int) (int, error) {
	want := make(map[int]bool, len(ports))
	for _, p := range ports {
		want[p] = true
	}
	held := map[string]bool{}
	for _, pid := range pids {
		dir := "/proc/" + strconv.Itoa(pid) + "/fd"
		fds, err := os.ReadDir(dir)
		if err != nil {
			continue // the process has ended: it holds nothing
		}
		for _, fd := range fds {
			link, err := os.Readlink(dir + "/" + fd.Name())
			if err == nil && strings.HasPrefix(link, "socket:[") {
				held[strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")] = true
			}
		}
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
		c, err := countIn(bufio.NewScanner(f), want, held)
		f.Close()
		if err != nil {
			return 0, err
		}
		n += c
	}
	return n, nil
}

// countIn counts the lines of a /proc/net/tcp table that match: a port
// wanted, a socket inode held.
func countIn(sc *bufio.Scanner, want map[int]bool, held map[string]bool) (int, error) {
	n := 0
	for first := true; sc.Scan(); first = false {
		f := strings.Fields(sc.Text())
		if first || len(f) < 10 || !held[f[9]] {
			continue // the header, or another program's socket
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

// Children returns pid and its child processes (nginx's workers).
func Children(pid int) []int {
	pids := []int{pid}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + strconv.Itoa(pid) + "/children")
	if err != nil {
		return pids
	}
	for _, f := range strings.Fields(string(b)) {
		if c, err := strconv.Atoi(f); err == nil {
			pids = append(pids, c)
		}
	}
	return pids
}
