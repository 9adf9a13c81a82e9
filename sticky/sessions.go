package sticky

import (
	"crypto/md5"
	"sync"
	"time"
)

// DefaultTimeout is how long sticky learn keeps a session nobody used:
// nginx's default timeout=.
const DefaultTimeout = 10 * time.Minute

// DefaultMaxSessions is the bound of a session table when none is given:
// about what nginx keeps in a zone of one megabyte.
const DefaultMaxSessions = 8000

// Sessions is sticky learn's session table: which server each session
// id is bound to. Like nginx's, it keys sessions by the MD5 of their id
// (a client's long id costs no more than a short one), forgets a session
// not used for the timeout, and, when full, drops the least recently used
// one. Its methods are safe for concurrent use; times are the caller's
// (time.Now(), whose monotonic reading the expiry uses).
type Sessions struct {
	timeout time.Duration
	max     int

	mu     sync.Mutex
	byKey  map[[md5.Size]byte]*session
	newest *session // the list of sessions by last use, newest first
	oldest *session
}

// session is one entry, on the list of sessions by last use.
type session struct {
	key          [md5.Size]byte
	id           string
	last         time.Time
	newer, older *session
}

// NewSessions returns an empty table keeping sessions for timeout since
// their last use (DefaultTimeout when 0) and at most max of them
// (DefaultMaxSessions when 0).
func NewSessions(timeout time.Duration, max int) *Sessions {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	if max <= 0 {
		max = DefaultMaxSessions
	}
	return &Sessions{timeout: timeout, max: max, byKey: make(map[[md5.Size]byte]*session)}
}

// Timeout returns how long a session is kept since its last use.
func (s *Sessions) Timeout() time.Duration { return s.timeout }

// Max returns how many sessions the table keeps at most.
func (s *Sessions) Max() int { return s.max }

// Lookup returns the id of the server session is bound to at now, or ""
// when it is unknown or expired. It does not count as a use: the request's
// end does (Learn).
func (s *Sessions) Lookup(session string, now time.Time) string {
	if session == "" {
		return ""
	}
	key := md5.Sum([]byte(session))
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.byKey[key]
	if e == nil {
		return ""
	}
	if s.expired(e, now) {
		s.remove(e)
		return ""
	}
	return e.id
}

// Learn is nginx's learning when a request that server id answered ends:
// with create not empty (the session the answer created), that session is
// bound to id, created if absent; otherwise, with lookup not empty (the
// session the request named), that session, if known, is bound to id.
// Either way the session's last use is now.
func (s *Sessions) Learn(create, lookup, id string, now time.Time) {
	name, mayCreate := create, true
	if name == "" {
		name, mayCreate = lookup, false
	}
	if name == "" || id == "" {
		return
	}
	key := md5.Sum([]byte(name))
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expire(now)
	e := s.byKey[key]
	if e == nil {
		if !mayCreate {
			return
		}
		if len(s.byKey) >= s.max {
			s.remove(s.oldest)
		}
		e = &session{key: key}
		s.byKey[key] = e
	} else {
		s.unlink(e)
	}
	e.id = id
	e.last = now
	s.pushNewest(e)
}

// Len returns the number of sessions held (expired ones included until
// the table next changes).
func (s *Sessions) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byKey)
}

func (s *Sessions) expired(e *session, now time.Time) bool {
	return now.Sub(e.last) >= s.timeout
}

// expire drops the sessions expired at now, oldest first.
func (s *Sessions) expire(now time.Time) {
	for s.oldest != nil && s.expired(s.oldest, now) {
		s.remove(s.oldest)
	}
}

func (s *Sessions) remove(e *session) {
	s.unlink(e)
	delete(s.byKey, e.key)
}

func (s *Sessions) unlink(e *session) {
	if e.newer != nil {
		e.newer.older = e.older
	} else {
		s.newest = e.older
	}
	if e.older != nil {
		e.older.newer = e.newer
	} else {
		s.oldest = e.newer
	}
	e.newer = nil
	e.older = nil
}

func (s *Sessions) pushNewest(e *session) {
	e.older = s.newest
	if s.newest != nil {
		s.newest.newer = e
	} else {
		s.oldest = e
	}
	s.newest = e
}
