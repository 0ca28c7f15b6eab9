// Package peerauth is the proof a cluster replica attaches to a call it
// forwards to the session's owner, and the owner's check of it. It is
// sans-IO: no sockets, no goroutines, no clock of its own (every call takes
// the time), so the rules below are tested by fuzzing the parser and by a
// property test over random forwards and replays (verifier_test.go).
//
// # The proof
//
// A forwarding replica (From) signs, with the cluster secret shared by every
// replica, everything the owner (To) will act on:
//
//	HMAC-SHA-256(secret, "sessiongate/forward/v2" ‖ From ‖ To ‖ Caller ‖
//	             Method ‖ Session ‖ SHA-256(request body) ‖ nonce ‖ expiry)
//
// (strings length-prefixed, so no two claim sets encode alike). The token
// sent in x-sessiongate-forward-auth carries only what the owner cannot know
// by itself: a version byte, the expiry (Unix milliseconds), a 16-byte nonce
// and the MAC. The owner rebuilds every other claim from what it sees: From
// and Caller from the hop headers, To is itself, Method is the call's,
// Session and the digest come from the request it received. A token lifted
// off one call therefore proves nothing about any other.
//
// Nonces are unique per signer (a random 8-byte prefix drawn when the
// signer is made, then a counter), not secret: the MAC protects them.
//
// # The rules (Verify: input → answer, first match wins)
//
//	token not base64url, wrong length or version   → ReasonMalformed
//	From or Caller empty                           → ReasonMalformed
//	From names the verifying replica itself        → ReasonSelf
//	expiry + Skew < now                            → ReasonExpired
//	expiry > now + TTL + Skew                      → ReasonTooFar
//	MAC differs (other session, body, method,
//	  caller, sender, destination, or a forgery)   → ReasonMismatch
//	nonce already accepted (a replay)              → ReasonReplay
//	nonce cache full                               → ReasonCacheFull
//	otherwise                                      → accepted; nonce remembered
//
// A nonce is remembered only after its MAC has been checked, so nobody
// without the secret can fill the cache or spend someone else's nonce.
//
// # The nonce cache
//
// Bounded by expiry: a nonce is kept at least until its proof would be
// refused as expired anyway (TTL + 2·Skew after it was accepted) and at most
// twice that, in two generations of maps per shard rotated every TTL +
// 2·Skew. It is also bounded in count (MaxNonces): when full, proofs are
// refused (ReasonCacheFull: failing closed) rather than memory growing.
// Shards have their own mutex: Verify may be called from many goroutines.
// Sign is safe for concurrent use too.
package peerauth
