package peerauth

import (
	"sync"
	"time"
)

const shards = 16

// nonceCache remembers accepted nonces for at least keep and at most twice
// that, and at most max of them. See the package doc.
type nonceCache struct {
	keep   time.Duration
	perMax int // per shard
	shards [shards]nonceShard
}

type nonceShard struct {
	mu        sync.Mutex
	cur, prev map[nonce]struct{} // guarded by mu
	rotateAt  time.Time          // guarded by mu; zero: not started
}

type addResult int

const (
	addOK addResult = iota
	addReplay
	addFull
)

func newNonceCache(keep time.Duration, max int) *nonceCache {
	per := max / shards
	if per < 1 {
		per = 1
	}
	return &nonceCache{keep: keep, perMax: per}
}

func (c *nonceCache) add(n nonce, now time.Time) addResult {
	s := &c.shards[int(n[len(n)-1])%shards] // the counter's low byte: spread evenly
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rotateLocked(now, c.keep)
	if _, ok := s.cur[n]; ok {
		return addReplay
	}
	if _, ok := s.prev[n]; ok {
		return addReplay
	}
	if len(s.cur)+len(s.prev) >= c.perMax {
		return addFull
	}
	if s.cur == nil {
		s.cur = make(map[nonce]struct{})
	}
	s.cur[n] = struct{}{}
	return addOK
}

// rotateLocked moves the generations on: cur becomes prev once keep has
// passed since cur was started, and both are dropped after twice keep.
func (s *nonceShard) rotateLocked(now time.Time, keep time.Duration) {
	switch {
	case s.rotateAt.IsZero():
		s.rotateAt = now.Add(keep)
	case !now.Before(s.rotateAt.Add(keep)):
		// Two generations old or more: all of it is expired.
		s.cur, s.prev = nil, nil
		s.rotateAt = now.Add(keep)
	case !now.Before(s.rotateAt):
		s.prev, s.cur = s.cur, nil
		s.rotateAt = s.rotateAt.Add(keep)
	}
}

func (c *nonceCache) len() int {
	n := 0
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		n += len(s.cur) + len(s.prev)
		s.mu.Unlock()
	}
	return n
}
