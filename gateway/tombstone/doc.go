// Package tombstone is a bounded set of keys that expire: the record a client
// keeps of requests whose callers gave up (keyed by request id) and of jobs
// it no longer wants (keyed by job id), so that a late answer is recognised
// and dropped instead of being delivered to somebody else.
//
// # TTL
//
// TTL computes a tombstone's lifetime. The base term is the one of the
// "global tombstone TTL" decision record,
//
//	request timeout + init timeout + max backoff + 5 s   (75 s by default),
//
// which covers an answer that arrives after the request timed out, the
// connection dropped, waited out the longest backoff and re-initialised. We
// do better than that record on its documented weak point: a call whose own
// budget (deadline or per-call override) exceeded the request timeout gets a
// tombstone that lives as long as that call needed,
//
//	max(base, call budget + init timeout + max backoff + 5 s),
//
// so a long call's late answer is still recognised. The store itself keeps one
// expiry per entry; it does not care how it was computed.
//
// # Memory: keys are hashed
//
// Keys are not stored. Each key is hashed to 64 bits with hash/maphash under
// a seed drawn per Store. A flat open-addressing table (linear probing,
// 16-byte slots: hash and expiry tick, load at most 3/4, no pointers for the
// garbage collector to scan) maps hash → expiry, and the expiry wheel holds
// the hash once more (8 bytes). A slot's home is the hash's top bits, so a
// lookup is usually one cache miss and doubling the table is a streaming
// copy. That keeps a million entries near 41 bytes each (see
// BenchmarkTombstoneMemory), within the 64 MiB budget, where a Go map of
// strings would need well over 100 bytes an entry.
//
// A hash collision makes Contains/Take report a key that was never inserted
// (a false positive) or makes two keys share one entry. The probability that
// any collision exists among n live keys is about n²/2⁶⁵: 2.7·10⁻⁸ for a
// million keys. Because the seed is random per Store and never leaves the
// process, a peer cannot choose keys that collide. What a collision could do
// depends on the user; package upstream consults tombstones only for
// envelopes that already match no live request or job, so a false positive
// can at worst make it count an unknown job's event as a late answer instead
// of cancelling that job as an orphan. It can never deliver anything to
// anybody.
//
// # Expiry costs O(expired)
//
// Expiry times are rounded up to a tick (the resolution, one second by
// default): a tombstone may outlive its TTL by up to one tick, never expire
// early. Entries are appended to the bucket of their tick; buckets sit in a
// min-heap by tick. Expire pops the buckets whose tick has passed and deletes
// their entries, so its cost is proportional to the number of entries (and
// buckets) it removes, never a sweep of the whole map. Entries re-inserted
// with a later expiry or taken early leave a stale hash in their old bucket;
// the stale hash is skipped when its bucket is reached (the map holds the
// authoritative expiry), and if stale hashes ever outnumber twice the
// capacity the wheel is rebuilt, which keeps memory bounded and the cost
// amortised O(1) per operation.
//
// # Capacity and overflow
//
// A Store holds at most its capacity of live entries. Inserting a new key into
// a full store evicts the entry that would expire soonest and counts it
// (Stats.Evicted); Insert reports the eviction. Evicting the soonest-expiring
// entry loses the least protection: it is the tombstone closest to being
// dropped anyway. Refusing the new entry instead would lose the freshest
// tombstone, the one most likely to be needed. Package upstream explains why
// an eviction is safe there (its generation gating and FIFO slots do not
// depend on tombstones being present).
//
// # Concurrency
//
// A Store is not safe for concurrent use; its owner guards it (package
// upstream holds it under its connection mutex). It starts no goroutines and
// holds no timers: the owner calls Expire when convenient, and lookups
// ignore entries that are past their expiry even before Expire removes them.
package tombstone
