package traefikplugin

import (
	"io"
	"strings"
	"sync"
	"testing"
)

// TestReplay: a view reads the client's body as it comes; a later view
// reads the same bytes, from the copy and then from the body; past the
// limit the copy goes, and a view behind the body can no longer read.
func TestReplay(t *testing.T) {
	body := strings.Repeat("0123456789", 100) // 1000 bytes
	for _, c := range []struct {
		limit, first int // the limit, and how much the first view reads
		replayable   bool
	}{{1000, 1000, true}, {1000, 300, true}, {999, 1000, false}, {0, 0, true}, {0, 1, false}} {
		r := newReplay(io.NopCloser(strings.NewReader(body)), c.limit)
		first := make([]byte, c.first)
		if _, err := io.ReadFull(r.view(), first); err != nil || string(first) != body[:c.first] {
			t.Fatalf("limit %d: the first view read %q, %v", c.limit, first, err)
		}
		if r.replayable() != c.replayable {
			t.Errorf("limit %d, %d read: replayable %v, want %v", c.limit, c.first, !c.replayable, c.replayable)
		}
		got, err := io.ReadAll(r.view())
		if c.replayable && (err != nil || string(got) != body) {
			t.Errorf("limit %d, %d read: the next view read %d bytes, %v; want the whole body", c.limit, c.first, len(got), err)
		}
		if !c.replayable && err != errReplayGone {
			t.Errorf("limit %d, %d read: the next view's error %v, want %v", c.limit, c.first, err, errReplayGone)
		}
	}
}

// TestReplayConcurrentViews: a failed try's view still reading while the
// retry's reads (the transport may read a body after RoundTrip returned):
// each reads the whole body, whichever of them reads the client's.
func TestReplayConcurrentViews(t *testing.T) {
	body := strings.Repeat("abcdefghij", 10000)
	r := newReplay(io.NopCloser(&slowReader{r: strings.NewReader(body)}), len(body))
	var wg sync.WaitGroup
	got := make([]string, 2)
	for k := range got {
		wg.Add(1)
		go func(k int) {
			defer wg.Done()
			b, _ := io.ReadAll(r.view())
			got[k] = string(b)
		}(k)
	}
	wg.Wait()
	for k, g := range got {
		if g != body {
			t.Errorf("view %d read %d bytes, want the %d of the body", k, len(g), len(body))
		}
	}
}

// slowReader hands out at most 7 bytes a read.
type slowReader struct{ r io.Reader }

func (s *slowReader) Read(p []byte) (int, error) {
	if len(p) > 7 {
		p = p[:7]
	}
	return s.r.Read(p)
}
