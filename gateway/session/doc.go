// Package session is the gateway's session table: it maps the opaque session
// ids the gateway hands to its callers onto upstream connections, binds each
// session to the caller that opened it, enforces the session caps, and closes
// sessions that have been idle too long.
//
// The caps are a gateway/budget.Budget named "sessions" (MaxSessions, and
// "sessions_per_caller" for MaxPerCaller): Open reserves a unit before it
// dials, and the unit comes back when the dial fails or the session leaves
// the table (Close, idle close, loss, Drain). A cap reached is a
// *budget.ExceededError naming it.
//
// # Session ids
//
// An id is "s1.<instance>.<secret>": a format version, the id of the gateway
// instance that owns the session, and 128 random bits (22 base64url
// characters). A router in front of several gateway replicas can therefore
// send a call to the owning instance from the id alone (ParseID), without a
// lookup. The runtime's own session id is never exposed.
//
// # Callers
//
// Every lookup names the caller. A session opened by one caller is invisible
// to every other: Get, Acquire, Close and List behave exactly as if it did
// not exist, so an id leaked to another caller reveals nothing.
//
// # Side effects
//
// Get is the status probe's lookup: a read-locked map access and a
// non-blocking look at the connection's Done channel. It touches no timer, no
// clock and no counter. Acquire is what every other call uses: it marks the
// session busy until the returned release function runs, and release resets
// the idle clock.
//
// # Goroutines and shutdown
//
// The table starts no goroutine of its own while sessions are idle: each
// session has one time.AfterFunc timer that fires when it may have become
// idle. A session is closed (by idleness, CloseSession or Drain) in a
// goroutine tracked by the table; Drain refuses new sessions, closes every
// session concurrently and waits for all of those goroutines.
package session
