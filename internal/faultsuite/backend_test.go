package faultsuite

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestBackendBodies: a body whole and right counts as checked; one that
// ends early counts as damaged; one cut by the backend's own kill is a
// lost request, not a damaged one.
func TestBackendBodies(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	b, err := NewBackend("a", addr, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Kill()
	body := strings.Repeat("x", 1000)
	sum := sha256.Sum256([]byte(body))
	post := func(length int, send string, then func()) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\n"+SumHeader+": "+hex.EncodeToString(sum[:])+"\r\nContent-Length: "+strconv.Itoa(length)+"\r\n\r\n"+send)
		if then != nil {
			time.Sleep(100 * time.Millisecond) // the handler is reading the body
			then()
		}
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		io.ReadAll(c)
	}
	post(len(body), body, func() {}) // whole and right
	if b.Bodies() != 1 || b.BadBodies() != 0 {
		t.Fatalf("a right body: %d checked, %d damaged", b.Bodies(), b.BadBodies())
	}
	// Half the body, then the client closes: the body ends early.
	func() {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\n"+SumHeader+": "+hex.EncodeToString(sum[:])+"\r\nContent-Length: 1000\r\n\r\n"+body[:500])
		time.Sleep(100 * time.Millisecond)
		c.Close()
	}()
	waitFor(t, func() bool { return b.BadBodies() == 1 }, "a body that ends early counted as damaged")
	// Half the body, then the backend is killed.
	post(len(body), body[:500], b.Kill)
	time.Sleep(100 * time.Millisecond)
	if b.Bodies() != 2 || b.BadBodies() != 1 {
		t.Errorf("after a kill mid-body: %d checked, %d damaged; want 2 and 1", b.Bodies(), b.BadBodies())
	}
}

func waitFor(t *testing.T, ok func() bool, what string) {
	t.Helper()
	for k := 0; k < 100 && !ok(); k++ {
		time.Sleep(20 * time.Millisecond)
	}
	if !ok() {
		t.Fatalf("not seen within 2 s: %s", what)
	}
}
