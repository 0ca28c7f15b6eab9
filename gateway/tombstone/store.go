package tombstone

import (
	"container/heap"
	"errors"
	"hash/maphash"
	"time"
)

// Epsilon is the fixed slack term of the TTL formula: it absorbs the ±20 %
// backoff jitter and clock granularity.
const Epsilon = 5 * time.Second

// TTL returns a tombstone's lifetime for a call with the given budget (the
// time the caller was prepared to wait; zero or less means the default
// request timeout):
//
//	max(requestTimeout, budget) + initTimeout + backoffMax + Epsilon
//
// With the defaults (30 s, 10 s, 30 s) that is 75 s. See the package
// documentation for why the budget extends it.
func TTL(requestTimeout, initTimeout, backoffMax, budget time.Duration) time.Duration {
	return TTLWithSlack(requestTimeout, initTimeout, backoffMax, budget, Epsilon)
}

// TTLWithSlack is TTL with another slack term than Epsilon, for tests that
// need tombstones to expire quickly.
func TTLWithSlack(requestTimeout, initTimeout, backoffMax, budget, slack time.Duration) time.Duration {
	return max(requestTimeout, budget) + initTimeout + backoffMax + slack
}

// DefaultResolution is the tick expiry times are rounded up to.
const DefaultResolution = time.Second

// Option configures a Store.
type Option func(*Store)

// WithResolution sets the tick expiry times are rounded up to (default one
// second). A finer tick expires entries closer to their TTL at the cost of
// more buckets. Values below one microsecond are raised to it.
func WithResolution(d time.Duration) Option {
	return func(s *Store) { s.res = max(d, time.Microsecond) }
}

// WithEpoch sets the time ticks count from (default: the time New is called).
// Only the differences between the times passed to a Store matter; tests use
// this to start from a fixed time.
func WithEpoch(t time.Time) Option {
	return func(s *Store) { s.epoch = t }
}

// Stats counts what a Store has done.
type Stats struct {
	Inserted uint64 // new keys inserted (re-insertions of a live key are not counted)
	Expired  uint64 // entries removed by Expire
	Evicted  uint64 // entries evicted because the store was full
	Taken    uint64 // entries removed by Take
}

// Store is a bounded set of expiring keys. See the package documentation.
// The zero value is not usable; call New.
type Store struct {
	seed     maphash.Seed
	epoch    time.Time
	res      time.Duration
	capacity int

	m       table // key hash -> expiry tick: live while now's tick < expiry tick
	buckets map[int64]*bucket
	heap    bucketHeap
	last    *bucket // bucket of the latest insert: most inserts share it
	queued  int     // hashes held by buckets, stale ones included
	free    *chunk  // recycled chunks
	nfree   int
	stats   Stats
}

const (
	chunkLen     = 256 // hashes per chunk: 2 KiB
	maxFreeChunk = 64
)

type chunk struct {
	keys [chunkLen]uint64
	n    int
	next *chunk
}

// bucket holds the hashes whose expiry tick is tick, in insertion order.
type bucket struct {
	tick       int64
	head, tail *chunk
	pos        int // next unread hash in head
	index      int // in the heap
}

// New returns an empty Store holding at most capacity live entries.
// It panics if capacity is not positive.
func New(capacity int, opts ...Option) *Store {
	if capacity <= 0 {
		panic(errors.New("tombstone: capacity must be positive"))
	}
	s := &Store{
		seed:     maphash.MakeSeed(),
		epoch:    time.Now(),
		res:      DefaultResolution,
		capacity: capacity,
		buckets:  make(map[int64]*bucket),
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Cap returns the capacity.
func (s *Store) Cap() int { return s.capacity }

// Len returns the number of entries held, including entries past their expiry
// that Expire has not removed yet.
func (s *Store) Len() int { return s.m.n }

// Stats returns the counts so far.
func (s *Store) Stats() Stats { return s.stats }

// Resolution returns the tick.
func (s *Store) Resolution() time.Duration { return s.res }

func (s *Store) hash(key string) uint64 { return fixHash(maphash.String(s.seed, key)) }

// floorTick is the tick now falls in.
func (s *Store) floorTick(now time.Time) int64 {
	d := now.Sub(s.epoch)
	t := int64(d / s.res)
	if d < 0 && d%s.res != 0 {
		t--
	}
	return t
}

// ceilTick is the first tick boundary at or after now+ttl.
func (s *Store) ceilTick(now time.Time, ttl time.Duration) int64 {
	d := now.Sub(s.epoch) + ttl
	t := int64(d / s.res)
	if d > 0 && d%s.res != 0 {
		t++
	}
	return t
}

// Insert records key until now+ttl (rounded up to the next tick). If key is
// already held, its expiry becomes the later of the two. If the store is full
// and key is new, the entry that would expire soonest is evicted first and
// Insert returns true.
func (s *Store) Insert(key string, ttl time.Duration, now time.Time) (evicted bool) {
	return s.insertHash(s.hash(key), s.ceilTick(now, ttl))
}

// InsertUntil is Insert with an absolute expiry time.
func (s *Store) InsertUntil(key string, expiry time.Time) (evicted bool) {
	return s.insertHash(s.hash(key), s.ceilTick(expiry, 0))
}

func (s *Store) insertHash(h uint64, exp int64) (evicted bool) {
	if s.m.n >= s.capacity {
		if sl := s.m.slotOf(h); sl == nil {
			evicted = s.evictOne()
		}
	}
	inserted, extended := s.m.insertMax(h, exp)
	if inserted {
		s.stats.Inserted++
	}
	if inserted || extended {
		s.push(h, exp)
	}
	return evicted
}

// Contains reports whether key is held and not past its expiry at now.
func (s *Store) Contains(key string, now time.Time) bool {
	exp, ok := s.m.get(s.hash(key))
	return ok && s.floorTick(now) < exp
}

// Take removes key and reports whether it was held and not past its expiry
// at now. An expired entry is removed too, but Take then reports false.
func (s *Store) Take(key string, now time.Time) bool {
	h := s.hash(key)
	exp, ok := s.m.get(h)
	if !ok {
		return false
	}
	s.m.del(h)
	// The hash stays in its bucket as a stale entry, skipped when reached.
	s.maybeCompact()
	if s.floorTick(now) < exp {
		s.stats.Taken++
		return true
	}
	s.stats.Expired++
	return false
}

// Expire removes every entry past its expiry at now and returns how many it
// removed. Its cost is proportional to the entries and buckets it removes.
func (s *Store) Expire(now time.Time) int {
	nowTick := s.floorTick(now)
	n := 0
	for len(s.heap) > 0 && s.heap[0].tick <= nowTick {
		b := heap.Pop(&s.heap).(*bucket)
		delete(s.buckets, b.tick)
		if s.last == b {
			s.last = nil
		}
		for c := b.head; c != nil; {
			start := 0
			if c == b.head {
				start = b.pos
			}
			for _, h := range c.keys[start:c.n] {
				if exp, ok := s.m.get(h); ok && exp == b.tick {
					s.m.del(h)
					n++
				}
			}
			s.queued -= c.n - start
			next := c.next
			s.release(c)
			c = next
		}
	}
	s.stats.Expired += uint64(n)
	return n
}

// NextExpiry returns the time of the earliest pending bucket, which is no
// later than the earliest expiry of a held entry; ok is false when nothing is
// pending. Owners use it to schedule the next Expire.
func (s *Store) NextExpiry() (t time.Time, ok bool) {
	if len(s.heap) == 0 {
		return time.Time{}, false
	}
	return s.epoch.Add(time.Duration(s.heap[0].tick) * s.res), true
}

// push appends h to the bucket of tick exp.
func (s *Store) push(h uint64, exp int64) {
	b := s.last
	if b == nil || b.tick != exp {
		b = s.buckets[exp]
		if b == nil {
			b = &bucket{tick: exp}
			s.buckets[exp] = b
			heap.Push(&s.heap, b)
		}
		s.last = b
	}
	c := b.tail
	if c == nil || c.n == chunkLen {
		nc := s.alloc()
		if c == nil {
			b.head = nc
		} else {
			c.next = nc
		}
		b.tail = nc
		c = nc
	}
	c.keys[c.n] = h
	c.n++
	s.queued++
	s.maybeCompact()
}

// evictOne removes the live entry that expires soonest.
func (s *Store) evictOne() bool {
	for len(s.heap) > 0 {
		b := s.heap[0]
		for b.head != nil {
			c := b.head
			for b.pos < c.n {
				h := c.keys[b.pos]
				b.pos++
				s.queued--
				if exp, ok := s.m.get(h); ok && exp == b.tick {
					s.m.del(h)
					s.stats.Evicted++
					return true
				}
			}
			b.head = c.next
			b.pos = 0
			if b.head == nil {
				b.tail = nil
			}
			s.release(c)
		}
		heap.Pop(&s.heap)
		delete(s.buckets, b.tick)
		if s.last == b {
			s.last = nil
		}
	}
	return false
}

// maybeCompact rebuilds the wheel from the map once stale hashes outnumber
// twice the capacity, bounding the wheel's memory. Amortised O(1).
func (s *Store) maybeCompact() {
	if s.queued <= 2*s.capacity+chunkLen {
		return
	}
	for _, b := range s.heap {
		for c := b.head; c != nil; {
			next := c.next
			s.release(c)
			c = next
		}
	}
	s.heap = s.heap[:0]
	clear(s.buckets)
	s.last = nil
	s.queued = 0
	for _, sl := range s.m.slots {
		if sl.h != 0 {
			s.push(sl.h, sl.exp)
		}
	}
}

func (s *Store) alloc() *chunk {
	if c := s.free; c != nil {
		s.free = c.next
		s.nfree--
		c.next = nil
		c.n = 0
		return c
	}
	return new(chunk)
}

func (s *Store) release(c *chunk) {
	if s.nfree >= maxFreeChunk {
		return
	}
	c.next = s.free
	c.n = 0
	s.free = c
	s.nfree++
}

// bucketHeap is a min-heap of buckets by tick.
type bucketHeap []*bucket

func (h bucketHeap) Len() int           { return len(h) }
func (h bucketHeap) Less(i, j int) bool { return h[i].tick < h[j].tick }
func (h bucketHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}
func (h *bucketHeap) Push(x any) {
	b := x.(*bucket)
	b.index = len(*h)
	*h = append(*h, b)
}
func (h *bucketHeap) Pop() any {
	old := *h
	n := len(old)
	b := old[n-1]
	old[n-1] = nil
	*h = old[:n-1]
	return b
}
