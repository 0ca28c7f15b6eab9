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
// # Ownership (Ownership: one replica's lease, its view of its peers, its sessions)
//
// Ownership is the lifecycle of the sessions a replica owns — lease, sweep,
// takeover, hand-off, token writes, fencing — as a sans-IO core: the
// replica's directory loop feeds it facts with the (monotonic) time they
// were observed and carries out what it answers. Rule table (input × state
// → action):
//
//	LeaseRefreshed(start)   lease not held before (start, lapse)   gen+1: every session re-confirms its epoch before serving writes
//	LeaseRefreshed          after an outage or a lapse               grace: no peer judged for Grace (LeaseTTL); every peer presumed alive now
//	LeaseFailed             —                                        outage: no peer judged until the next refresh and a grace
//	DirectoryFailed         —                                        counted only (one lost reply is no outage)
//	(time)                  now ≥ leaseStart + LeaseTTL − Margin     lapse: gen+1; MayServe and MayResume false; no takeovers; no writes but claims and restores
//	MarkerSeen(m)           m ≠ marker last seen                     flush: gen+1, every record Restored at once (higher epoch wins),
//	                                                                 sessions unconfirmed before it serve only after the grace and a Confirm; grace
//	MarkerSeen(m)           flush, a claim unanswered (claim unsure) the claim is made again, but serves only after the grace and a Confirm
//	                                                                 (it may have been taken over before the flush erased the record)
//	PeersSeen               judging                                  live peer: lastAlive = now − (LeaseTTL − TTL left) (its last refresh)
//	PeersSeen               not judging (outage, grace, lapse)       every peer: lastAlive = now
//	MayTakeOver(owner)      owner's lease live                       Live: forward
//	MayTakeOver             own lease lapsed                         NotYet (UNAVAILABLE, retry): a replica that cannot show it is live takes nothing
//	MayTakeOver             released ("") / own record, not held     Take (released / self)
//	MayTakeOver             lease absent, now − lastAlive ≥ TTL      Take (dead); else NotYet
//	Wrote(OK)               decided in the current gen               epoch confirmed: MayServe
//	Wrote(Fenced)           —                                        detach silently (never close upstream)
//	Wrote(Missing)          —                                        missing: detached at the next Due unless a flush is detected first (then Restore);
//	                                                                 the directory answers a record below the epoch held so too (a stale restore)
//	Wrote(Unreachable)      Claim                                    claim unsure: served only while the lease holds in the gen of the claim
//	Welcome                 claimed                                  token pending: WriteToken; no upstream resume until written
//	Claimed(epoch, marker)  a takeover's claim succeeded             held, not serving: MayServe false; its record kept (Confirm, Restore)
//	Claimed(marker)         marker ≠ marker last seen                a flush came between the claim and now: Restore (unconfirmed if lapsed)
//	MarkerSeen(m)           flush, a session held (not resumed yet)  Restore too: the record is the only trace of it (a takeover queued its resume)
//	MarkerSeen(m)           flush, held, a lapse since its claim     Restore IfAbsent, then the grace and a Confirm: the previous owner, whose
//	                                                                 transport no resume has cut, may restore its own (it then wins; the claim is fenced)
//	MayResume               held                                     only with the record present and confirmed in the current gen (after a
//	                                                                 flush: once restored), the lease valid: the welcome's token can be written
//	Resumed                 held                                     serving; false if fenced or vanished meanwhile (detach the new transport)
//	ResumeFailed(lost)      held                                     lost: gone, the record deleted
//	ResumeFailed(released)  held                                     gone, released; a Restore due (not IfAbsent) is made first, or the session vanishes
//	                                                                 with its record; the shell reads the marker first, and gives nothing back while
//	                                                                 a restore is due (Restoring)
//	Recovering(marker age)  no record, marker absent or young        UNAVAILABLE, never NOT_FOUND: owners are restoring
//
// The directory's takeover script adds two checks of its own: the owner's
// lease is absent, and the directory's incarnation marker is the one the
// taker last saw (a flush since then makes every lease look absent). The
// simulated directory of the property test makes both checks, and the
// replicas learn the marker only as gateway/server does (the loop's tick and
// a refused takeover, never the lease refresh), their lease, tick and sweep
// running in a random order when several are due: a replica restarted with
// the same instance id, whose predecessor's lease a flush erased, is
// otherwise judged dead by a peer that never saw the new process's lease
// ("no-marker-check" is caught).
//
// The property test (ownership_prop_test.go) runs ≥ 10,000 random,
// replayable schedules of simulated replicas, directory and runtime under
// stalls, flushes, restarts without data, lost replies, kills, restarts,
// pauses, partitions and clock drift, checks after every step that no two
// replicas serve one session, that no live session is answered NOT_FOUND
// or lost, that directory-only faults move no session, and that every
// session ends with one owner; TestOwnershipCatchesBrokenRules removes
// rules (grace, lapse, restore, the restore of held sessions, recovering,
// resume hold, the takeover script's marker check) and shows each is
// caught. A sweep's takeovers are claimed in a batch and resumed later (a
// background queue, or at once by a call for one of them), so that a
// flush or a fault can land between a claim and its resume. The schedules replay by
// seed: no random draw follows map order.
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
//   - No call is forwarded to a silent owner (a forward from this replica
//     got no first byte, none answered since) whose lease ends within the
//     first-byte bound: the forward would hold the call past the takeover
//     that follows the lease's end. The call waits for that end instead
//     (Await, CallWait.PauseUntil); it never waits for an owner that
//     answers or whose lease is gone (TestRouteAwaitRuleCaught).
//
// # Call pace (CallWait: one call on the replica that received it)
//
// While a session's owner is unsettled a call waits, within OwnerWait and
// a reserve before its deadline, to be routed again; CallWait says when it
// pauses and when it is forwarded. Rule table (input × state → action):
//
//	Pause          now + next delay < until                  pause the delay (20 ms doubling to 200 ms), route again
//	Pause          otherwise                                 wait over: the call gets the answer it has (the routing's error)
//	PauseUntil(t)  t < until                                 pause to t (Route's Await: a silent owner's lease end), route again
//	PauseUntil(t)  otherwise                                 as Pause
//	Forward(o, a)  no forward of the call refused yet        forward at once: the owner is new to it, whatever it waited before
//	Forward(o, a)  one refused, by another replica           forward at once (the first re-route)
//	Forward(o, a)  otherwise                                 Pause first; wait over: the call gets the last refusal
//	Refused(o, a)  —                                         counts the forward (refused before the owner ran it, or never sent)
//
// until = min(first use + OwnerWait, deadline − max(a tenth of what is
// left, 250 ms)). The property test (callwait_test.go) runs 20,000 random
// call schedules — waits, forwards answered or refused by three owners, the
// call served here — and checks that every call ends with an answer (never
// with none, which grpc-go would send as an empty OK message), that its
// pauses stay within OwnerWait and out of the deadline's reserve, that a
// first forward goes at once and no forward goes again to the replica that
// just refused it without a pause, that a wait for a silent owner's lease
// routes the call again at the lease's end (neither before it nor after),
// and that the call ends. It catches the rule before the fix
// ("pace-by-attempt": a first forward after a pause waited like a re-route
// and, the wait being over, the call had no answer), "no-pause-same" and
// "await-blind" (PauseUntil paced like Pause).
package cluster
