package cluster

import (
	"sync"
	"time"
)

// OwnerCache remembers, for a short time, which replica owns a session, so
// that a replica forwarding calls for a session held elsewhere skips the
// directory read on every call. It has no clock of its own (callers pass
// now) and starts no goroutines; its methods may be called concurrently.
//
// # Why a stale entry is safe
//
// An entry is a hint, never an authority. The forwarder uses it only for a
// call that came from a client (a forwarded call never reads the cache: it
// is routed from the local table and the directory, and never forwarded
// again). The replica the entry names decides by itself, from its own
// table and the directory, exactly as for any forwarded call:
//
//   - it holds the session live: it serves the call (it is the owner; the
//     entry was right);
//   - it does not hold it and the directory names another live owner: it
//     refuses with UNAVAILABLE NOT_OWNER before running the handler — it
//     must not forward again;
//   - it is draining: it refuses with UNAVAILABLE DRAINING, also before
//     the handler;
//   - the owner's lease is gone or the session was released: it takes the
//     session over by epoch (the directory's compare-and-set decides any
//     race) and serves it — it is then the owner;
//   - no such session for the caller: NOT_FOUND, the same answer the
//     directory would have given the forwarder;
//   - it is down: the call fails before or while being sent.
//
// So a stale entry can never get a call served by a replica that does not
// own the session. The forwarder drops the entry on every answer but a
// served one (After), and also when the answer's owner hint names another
// replica; after a refusal (NOT_OWNER, DRAINING: the handler did not run,
// so a second attempt cannot run a job twice) it drops the entry, reads
// the directory and, if that names another destination, tries once more.
// Entries live for a short TTL, which bounds how long a replica that lost a
// session without refusing (it cannot happen by the rules above, but a
// peer of an older version might) keeps receiving its calls.
type OwnerCache struct {
	// Immutable.
	ttl time.Duration
	max int

	mu sync.Mutex
	m  map[string]ownerEntry // guarded by mu; by session id
}

type ownerEntry struct {
	caller, owner, addr string
	until               time.Time
}

// NewOwnerCache returns a cache whose entries live ttl, holding at most
// max sessions (max ≤ 0: 65536).
func NewOwnerCache(ttl time.Duration, max int) *OwnerCache {
	if max <= 0 {
		max = 1 << 16
	}
	return &OwnerCache{ttl: ttl, max: max, m: make(map[string]ownerEntry)}
}

// Get returns the owner and its address cached for session id, if an entry
// for this caller is still fresh at now. An entry of another caller is a
// miss (the directory decides what that caller may learn).
func (c *OwnerCache) Get(id, caller string, now time.Time) (owner, addr string, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[id]
	switch {
	case !ok:
		return "", "", false
	case !now.Before(e.until):
		delete(c.m, id)
		return "", "", false
	case e.caller != caller:
		return "", "", false
	}
	return e.owner, e.addr, true
}

// Put records that the directory named owner at addr for session id, as
// read at now for caller.
func (c *OwnerCache) Put(id, caller, owner, addr string, now time.Time) {
	if owner == "" || addr == "" || c.ttl <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[id]; !ok && len(c.m) >= c.max {
		c.evictLocked(now)
	}
	c.m[id] = ownerEntry{caller: caller, owner: owner, addr: addr, until: now.Add(c.ttl)}
}

// evictLocked makes room: expired entries first, then arbitrary ones
// until a tenth of the cache is free.
func (c *OwnerCache) evictLocked(now time.Time) {
	for id, e := range c.m {
		if !now.Before(e.until) {
			delete(c.m, id)
		}
	}
	for id := range c.m {
		if len(c.m) < c.max-c.max/10 {
			return
		}
		delete(c.m, id)
	}
}

// Forget drops the entry of session id.
func (c *OwnerCache) Forget(id string) {
	c.mu.Lock()
	delete(c.m, id)
	c.mu.Unlock()
}

// Len is the number of entries (fresh or not yet evicted).
func (c *OwnerCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

// Reply classifies the answer to a forwarded call.
type Reply uint8

const (
	// Served: the peer ran the handler (success, or an error of the call
	// itself such as INVALID_ARGUMENT or DEADLINE_EXCEEDED).
	Served Reply = iota
	// Refused: the peer refused before running the handler because it is
	// not the owner (NOT_OWNER) or is draining (DRAINING). A second
	// attempt elsewhere cannot run anything twice.
	Refused
	// Failed: anything else — the peer could not be reached or the
	// connection broke (the outcome may be unknown), the session is not
	// there (NOT_FOUND, lost), the peer's directory was unavailable.
	Failed
)

// After decides, from the answer to a forward to usedOwner, whether the
// cached owner stays (keep) and whether the call is routed again from the
// directory and sent once more (retry; only after a refusal, and only on
// the first attempt). hintOwner is the owner named by the answer's owner
// hint ("" when it carried none).
func After(r Reply, usedOwner, hintOwner string, attempt int) (keep, retry bool) {
	keep = r == Served && (hintOwner == "" || hintOwner == usedOwner)
	retry = r == Refused && attempt == 0
	return keep, retry
}
