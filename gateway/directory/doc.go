// Package directory is the cluster directory of sessiongate: which replica
// owns which session, kept in a real Redis (redis-server 7, single instance
// or a Sentinel-managed primary) so that any replica can find a session's
// owner, and take the session over when the owner is gone.
//
// # Records
//
// Per replica, a lease (a hash, with a TTL):
//
//	<prefix>replica:<instance> = {addr, started_ms, incarnation}   PEXPIRE LeaseTTL (5 s)
//
// refreshed by Run every LeaseTTL/3. Its cost is per replica, not per
// session: a session record names its owner, and "is the owner alive" is
// "does its lease key exist". incarnation is random per process, so a second
// process started with the same instance id does not refresh (steal) a live
// lease; it waits until that lease expires (Counters.LeaseConflicts).
//
// Two keys serve the orphan sweep (see Orphans), without a TTL:
//
//	<prefix>replicas = set of instance ids    SADD by every lease refresh
//	<prefix>releases = counter                INCR by every Release
//
// An instance leaves the set once its lease is gone and a walk of the
// keyspace found nothing of its left to adopt.
//
// The owner index, kept by the same scripts that change records (Claim,
// Takeover, Release, Delete, Restore), so that finding a dead replica's
// sessions is O(its sessions), not O(records) (OrphansOf):
//
//	<prefix>owned:<instance> = set of session ids        no TTL; stale entries dropped by OrphansOf
//	<prefix>released         = set of released ids        no TTL
//
// The incarnation marker, read at Open and by each replica's loop
// (Marker): a marker other than the one last read means Redis lost its
// data; owners then Restore their records (the higher epoch wins), Takeover
// refuses (ErrFlushed) until the taker has read the new marker, and for a
// while after a marker re-created after a loss Get answers a missing record
// with ErrRecovering, never ErrNotFound:
//
//	<prefix>incarnation = "<random>" or, re-created after a loss, "<random>:r:<ms>"
//
// CheckInstance refuses a second process with a live instance id: it waits
// a crashed predecessor's lease out (at most 1.5 × LeaseTTL) and fails with
// ErrInstanceInUse if the lease is refreshed meanwhile.
//
// Per session, a hash:
//
//	<prefix>session:<id> = {owner, epoch, caller, runtime, upstream,
//	                        token, seq, updated_ms}                 PEXPIRE SessionTTL (600 s)
//
// owner is an instance id, "" once released for handoff. epoch starts at 1
// and grows by one on every takeover. token is the latest ARCP resume token,
// encrypted (see Tokens). seq is the last acked event_seq, a decimal string
// compared exactly (never as a Lua double). updated_ms is the Redis server's
// clock. Every write refreshes the record's TTL, so a crashed cluster's
// leftovers vanish; an owner must write (Update with a zero Change will do) at
// least once per SessionTTL, which its acks and welcomes normally do.
// The prefix defaults to "sessiongate:".
//
// # Scripts
//
// Every change is one Lua script (EVALSHA, falling back to EVAL after a
// script flush; go-redis redis.Script), so the comparison and the write are
// atomic:
//
//   - Claim: create the record, owner = me, epoch = 1; ErrExists if present.
//   - Update: if owner == me and epoch == mine, write the token (if given) and
//     seq = max(stored, given): the acked seq never goes backwards.
//   - Takeover: if owner == "" (released), owner == me, or the owner's lease
//     key is gone: epoch+1, owner = me; return the record and the decrypted
//     token. Otherwise *OwnedError with the owner's advertised address.
//   - Release: if owner == me and epoch == mine: owner = "", data kept, so any
//     replica may take over at once, without waiting for a lease to expire.
//   - Delete: if owner == me and epoch == mine: remove (the session closed).
//   - Get and Owner: read-only scripts (flags=no-writes, EVALSHA_RO) for a
//     status probe and for forwarding; they change nothing, not even a TTL,
//     and a probe never triggers a takeover.
//   - Orphans: SCAN MATCH <prefix>session:* in batches of 512 keys, each
//     batch checked by a read-only script (owner "" or lease gone); but
//     first one read-only script, O(replicas), reads the releases counter
//     and the registered replicas whose lease is gone, and the walk happens
//     only when that, or orphans found by the last walk, or
//     Config.OrphanScanEvery (30 s) since it, says there may be orphans.
//
// A refused write is a *FencedError (errors.Is(err, ErrFenced)): another
// replica took the session over, or this one released it. The caller drops
// the session silently, never session.close: the upstream session is somebody
// else's now. ErrNotFound means the record is gone (closed by its owner,
// expired, or Redis lost its data); the caller must not assume it still owns
// the session. An Update that finds the record below the epoch it gives also
// answers ErrNotFound: only a flush, and a stale owner's Restore after it,
// leave a record there; the caller restores its own once it has seen the new
// marker (the higher epoch wins), instead of being fenced by the stale one.
//
// The rules live apart from I/O in rules.go (decide: record and lease state
// in, verdict and new record out). A property test runs random, replayable
// schedules (DIRECTORY_SEED) through decide checking the invariants (only the
// holder of the latest epoch writes; a takeover happens only when the owner
// is released, itself, or without a lease, and always bumps the epoch; the
// seq never goes backwards; a refused call changes nothing), shows that
// deliberately broken rules are caught, and runs the same schedules through
// the Lua on a real redis-server requiring identical verdicts and records.
//
// # Fencing argument
//
// ARCP resume tokens are single-use and rotate on every welcome; presenting
// one cuts off whoever held the session before. The directory adds an epoch
// so that a replica also learns, from Redis, that it lost the session:
//
//  1. At most one replica can write a record: the one named owner at the
//     current epoch. A takeover bumps the epoch atomically with the owner
//     check, so the previous owner's next Update, Release or Delete is
//     refused (ErrFenced), and two replicas racing to take over get one
//     winner (the loser sees the winner's live lease: ErrOwned).
//  2. The owner writes the new token after every welcome, before using the
//     new transport, and writes the acked seq before acking it upstream.
//     So the stored token is the one the runtime currently accepts, and the
//     stored seq is never beyond what the runtime still retains: the runtime
//     discards events only once acked, and nothing is acked before the
//     directory holds that seq. A takeover therefore presents an unused token
//     and a seq the runtime can replay from.
//  3. If the owner dies between a welcome and writing its token, the stored
//     token is already used: the takeover's resume is refused by the runtime
//     and the session is lost with a definite error, never held twice.
//     If a lease expires while its owner is alive but cut off from Redis, a
//     takeover resumes the upstream session, which cuts the old owner's
//     transport off; its next directory write is fenced. Either way there is
//     never a second holder of an upstream session.
//  4. Keys are never trusted over the epoch: no keyspace notifications, no
//     client-side caching. Leases decide only who may take over, never who
//     may write.
//
// The argument needs Redis to keep its data: an instance that restarts empty
// (no persistence, a failover to a lagging replica) forgets epochs. Owners
// then get ErrNotFound and may Claim again at epoch 1; the runtime's
// single-use tokens remain the last line of defence. Use persistence (AOF
// everysec) or accept that a Redis restart can lose sessions.
//
// # Tokens
//
// Resume tokens are credentials and are encrypted at rest with AES-256-GCM.
// The KeyRing comes from configuration as "id:base64key" entries: the first
// key encrypts, all keys decrypt, so a key is rotated by putting a new one
// first and dropping the old one after SessionTTL. A stored token is
// "<key id>:<base64url(nonce | ciphertext | tag)>"; the associated data is the
// session id, so a ciphertext copied into another record does not decrypt.
// A token under an unknown key id, or one that fails authentication, is a
// *KeyError naming the session and the key id.
//
// # Failure behaviour
//
// Open checks PING and fails with an *UnavailableError when Redis cannot be
// reached. Every operation is bounded by Config.OpTimeout (default 2 s, all
// round trips and retries included; one connection attempt is bounded by
// DialTimeout) and a failure is an *UnavailableError whose message names the
// directory ("directory: redis at unix://:xxxxx@/path: update: …", the
// password redacted), errors.Is(err, ErrUnavailable), which the gRPC edge
// maps to UNAVAILABLE. An operation whose caller's context ended returns that
// context's error instead. Nothing is cached: when Redis is back, the next
// operation works (the connection pool redials). While Redis is down, Run
// keeps trying every LeaseTTL/3 and counts LeaseFailures; the lease expires
// after LeaseTTL and other replicas may then take this replica's sessions
// over (LeaseValidUntil tells the replica when that may happen).
// go-redis logs failed dials on its process-wide logger (redis.SetLogger).
//
// # Goroutines
//
// The package starts none. Run is a blocking loop the caller owns (start it
// in the caller's errgroup); when its context ends it deletes the lease, if
// still this process's, and returns nil. Cancel it only when this replica
// stops owning sessions, after releasing them on a graceful shutdown. Close
// closes the connection pool and is idempotent. All methods are safe for
// concurrent use; Run runs at most once at a time. Token writes for one
// session must not be issued concurrently by its owner.
//
// # Cost
//
// Per replica: one script every LeaseTTL/3 (0.6 calls/s at 5 s).
// Per session: one key of a few hundred bytes; one script per Claim, Update,
// Takeover, Release, Delete or Get (about 30 µs on a unix socket, see
// BenchmarkUpdate and BenchmarkGet: ~30,000 ops/s on a busy 2-core machine).
// Orphans is O(keys in the Redis database): one SCAN and one read-only script
// per 512 keys, whatever the number of orphans; run it every few seconds to
// tens of seconds, well inside the resume window, and give the directory its
// own database so the SCAN does not walk unrelated keys. Counters and
// Observer expose operation counts, errors and latency for the gRPC edge to
// export.
package directory
