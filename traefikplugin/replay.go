package traefikplugin

import (
	"errors"
	"io"
	"net/http"
	"sync"
)

// replay is a request body streamed to a server as the client sends it,
// with a copy of what has been read of it, up to a limit, so that a retry
// can send it again: the copy, then the rest of the client's body. Past
// the limit the copy goes, and with it the retries: the memory a request
// holds for them is bounded, and a slow upload is not held back from the
// server until it ends (nor its Expect: 100-continue answered for the
// server).
//
// Each try reads its own view. Views share the client's body under a lock,
// since the transport may still be reading a failed try's body when the
// retry begins; whatever one of them reads joins the copy for the others.
type replay struct {
	mu    sync.Mutex
	src   io.ReadCloser
	buf   []byte // what was read of src, while within limit
	n     int    // bytes read of src
	limit int
	over  bool  // more than limit read: buf is gone
	err   error // src's end (io.EOF) or failure
}

// errReplayGone is what a view behind the client's body reads once the
// copy is gone (a try still reading after its retry went past the limit).
var errReplayGone = errors.New("lbpack: request body read past the retry copy")

func newReplay(src io.ReadCloser, limit int) *replay {
	return &replay{src: src, limit: limit}
}

// replayLimit is how much of a request's body is kept for a retry:
// maxRetryBody, but nothing for POST, PATCH and LOCK, which move to
// another server only when the connection to the first was never made,
// and so before any of the body was read.
func replayLimit(s *settings, method string) int {
	switch method {
	case http.MethodPost, http.MethodPatch, "LOCK":
		return 0
	}
	return int(s.maxRetryBody)
}

// view returns a reader of the body from its start, for one try.
func (r *replay) view() io.ReadCloser { return &replayView{r: r} }

// replayable reports whether a view can still read the body from its
// start.
func (r *replay) replayable() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return !r.over
}

// replayView is one try's reading of a replay. Closing it leaves the
// client's body open for the next try (the server closes it when the
// request ends).
type replayView struct {
	r   *replay
	pos int
}

func (v *replayView) Read(p []byte) (int, error) { return readReplay(v, p) }

// Close ends the view, not the body.
func (v *replayView) Close() error { return nil }

// readReplay reads from the copy while v is behind the client's body, and
// from the body itself (keeping what it reads) once v has caught up.
func readReplay(v *replayView, p []byte) (int, error) {
	r := v.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if v.pos < r.n {
		if r.over {
			return 0, errReplayGone
		}
		k := copy(p, r.buf[v.pos:])
		v.pos += k
		return k, nil
	}
	if r.err != nil {
		return 0, r.err
	}
	k, err := r.src.Read(p)
	if k > 0 {
		keepRead(r, p[:k])
		v.pos += k
	}
	if err != nil {
		r.err = err
	}
	return k, err
}

// keepRead adds b, just read, to r's copy, or drops the copy once it would go
// past the limit. The copy grows by doubling, never beyond the limit.
func keepRead(r *replay, b []byte) {
	r.n += len(b)
	if r.over {
		return
	}
	if r.n > r.limit {
		r.over = true
		r.buf = nil
		return
	}
	if len(r.buf)+len(b) > cap(r.buf) {
		size := 2*cap(r.buf) + len(b)
		if size > r.limit {
			size = r.limit
		}
		grown := make([]byte, len(r.buf), size)
		copy(grown, r.buf)
		r.buf = grown
	}
	r.buf = append(r.buf, b...)
}
