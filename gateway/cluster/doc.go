// Package cluster holds the rules of sessiongate's cluster mode apart from
// I/O ("sans-IO"): which replica serves a call for a session (Route), and
// how far the owner may let the runtime discard a session's events (the
// acked seq it writes to the directory: AckWindow). It has no sockets,
// goroutines or clock of its own: facts in, a decision out. The gRPC edge
// (gateway/server, cluster*.go) gathers the facts — the local session table,
// the directory record in Redis, the hop header of a forwarded call — and
// carries the decision out: serve, forward over gRPC to the owner, take the
// upstream session over, or answer NOT_FOUND / UNAVAILABLE. OwnerCache and
// After are the rules of the forwarder's owner cache: what a stale entry
// can and cannot do, when an entry goes, when a refused call is sent once
// more (checked with random schedules by TestStaleCacheNeverMisdelivers).
//
// # Invariants (checked exhaustively by TestRouteInvariants)
//
//   - A session this replica holds live is always served here.
//   - A call forwarded by a peer is never forwarded again (loop prevention).
//   - A session whose owner holds a live lease is never taken over: the
//     call goes to that owner.
//   - A probe (read-only call) never takes over.
//   - A call whose caller is not the session's caller learns nothing: it is
//     answered NOT_FOUND exactly as if the session did not exist.
//   - When the directory cannot be read, a session not held here gets
//     UNAVAILABLE naming the directory, never NOT_FOUND.
package cluster
