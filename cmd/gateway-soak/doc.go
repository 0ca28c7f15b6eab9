// Command gateway-soak is sessiongate's fault-injection soak. In one process
// it starts the ARCP reference runtime behind a fault-injecting TCP proxy,
// the gateway pointed at the proxy, and a bounded mixed load of real gRPC
// calls; it injects network faults on a schedule drawn from a seed, checks
// every answer and every stream, and prints what happened. It exits 1 on
// any misdelivery, lost or duplicated event, leaked goroutine, call
// without a definite end, or retained bytes still accounted to closed
// sessions.
//
//	go run ./cmd/gateway-soak                       # 10 minutes, reference dialect, seed 1
//	go run ./cmd/gateway-soak -short                # CI: 20 s of load, about 35 s in all
//	go run ./cmd/gateway-soak -duration 3m -seed 7 -dialect ts-sdk
//	go run ./cmd/gateway-soak -json                 # the report as JSON (progress on stderr)
//	go run ./cmd/gateway-soak -no-faults            # a control run: the same load, no faults
//	go run ./cmd/gateway-soak -v                    # with the gateway's and runtime's WARN/ERROR log
//
// # The rig
//
// Everything listens on 127.0.0.1. The runtime (gateway/arcpruntime, with
// the dialect of -dialect: reference, go-sdk or ts-sdk; heartbeat interval
// 1 s, resume window 60 s) sits behind a github.com/Shopify/toxiproxy/v2
// Proxy used as a library: toxics are added to and removed from its
// ToxicCollection directly, without toxiproxy's HTTP API. The gateway
// (gateway/server, as cmd/gateway assembles it, with three caller tokens)
// dials the runtime through the proxy with quick reconnects (backoff 100 ms
// doubling to 1 s, handshake timeout 3 s). WatchJob's initial and gap
// limits are set to 6 s, so that streams a fault starves end soon and
// definitely.
//
// # Faults
//
// One fault at a time, 0.5–2.5 s of calm between two, kind and parameters
// from the seed:
//
//   - latency: 20–300 ms ± jitter on both directions, 1–5 s;
//   - bandwidth: runtime → gateway at 16–128 KB/s, 1–4 s;
//   - slicer: every write cut into pieces of 8–64 bytes, both directions, 1–4 s;
//   - reset_peer: every connection that carries data is closed (with RST if
//     its link started under the toxic), one direction, for at least one
//     heartbeat interval so idle sessions are hit too;
//   - half_open: both directions black-holed with connections left open
//     (toxiproxy's timeout toxic with timeout 0), for longer than the
//     heartbeat loss and handshake timeouts; then the proxy closes what is
//     still connected before the toxics go, since a real TCP connection never
//     resumes with bytes missing;
//   - drop: the proxy stops (every connection closed, new ones refused) for
//     0.2–3 s.
//
// # Load
//
// -workers goroutines (12; 8 with -short) each pick, from their own seeded
// source, an action and one of the sessions (2 per caller, 3 callers; 1 per
// caller with -short), until the duration has passed; each then finishes the
// action it is in, bounded by its calls' budgets. Actions: RunJob(echo) with
// a unique token; RunJob(sleep) whose caller gives up early, by a deadline or
// by cancelling; SubmitJob(stream) with one fast WatchJob, or a fast and a
// slow one; a slow watcher (20–100 ms per item); a non-reading watcher (at
// most 2 at a time); a watched stream cancelled with CancelJob while it runs;
// GetSessionStatus of the caller's session and of another caller's;
// CloseSession (the next action opens a new session). A session the gateway
// reports NOT_FOUND after an UNAVAILABLE, UNAUTHENTICATED or NOT_FOUND
// answer is counted as lost and replaced.
//
// Every call but the give-ups sends x-timeout-ms (its budget: RunJob 2–6 s,
// OpenSession 8 s, SubmitJob and CancelJob 5 s, GetSessionStatus 2 s,
// WatchJob 25 s) and has a client deadline 3 s past budget + slack, so that
// the gateway's own answer, not the client's timer, ends every call that
// ends in time. The give-ups send no budget: theirs is their deadline.
//
// # Definitions
//
//   - Outcome: the gRPC code a call ended with, by RPC, and for errors the
//     ErrorInfo reason (with the TimeoutExceeded limit). A call that fails
//     with a code is an outcome, not a violation: UNAVAILABLE for a lost
//     session, OUTCOME_UNKNOWN, DEADLINE_EXCEEDED at a budget. Codes that
//     read as a gateway fault (INTERNAL, UNKNOWN, DATA_LOSS) are listed as
//     notes.
//   - MISDELIVERY: a RunJob result that does not carry its own call's token;
//     a stream event whose message names another job's count (every stream
//     job of a run gets a count different from the 270 jobs around it), a
//     result with another count, an item after the terminal; a caller that
//     sees another caller's session as anything but NOT_FOUND.
//   - LOST: on a WatchJob stream (always from the start), an event i
//     skipped while later ones arrive (a stream that continued past a gap,
//     whatever its end), or a stream that ended OK without a terminal item,
//     or with a result but without every event 0…count-1.
//   - DUPLICATE: an event i delivered twice on one stream, or an item whose
//     event_seq is not above the previous one's.
//   - Definite stream end: a WatchJob that ended with an error code (gap
//     limit, SLOW_CONSUMER, SESSION_CLOSED, UNAVAILABLE for a lost
//     session, …). What it did not deliver is not lost; its ends are
//     counted by code and reason.
//   - NO DEFINITE END: a call that ended later than its budget + slack (2
//     s; 4 s in the test, under -race): only the client's own timer ended
//     it, or nothing did. A non-reading watcher stops reading after a few
//     items for gap + slack + 1 s, then drains: the gateway must have ended
//     the stream by its limits meanwhile, so the drain must end within 5 s,
//     with an error. A drain that ends OK after the stall means the whole
//     stream fit in the flow-control windows (counted, not a violation).
//   - Leaked goroutines: after the load, every session is closed and the
//     goroutines of the process, the proxy's apart (toxiproxy's link
//     goroutines can outlive a connection its toxic cut), must come back
//     to the baseline (the rig up, client connections ready, no session)
//     within a tolerance of 5, waited for at most 30 s. The groups that
//     grew are printed. Heap (HeapAlloc, HeapInuse after GC) before and
//     after is printed, not checked.
//   - Retained bytes leaked: once every session is closed, the gateway's
//     retained-bytes budget (results and events held for callers) must be
//     back to zero within 5 s, and never released more than was held.
//
// The report also gives faults injected by kind, the gateway's upstream
// counters (every field of upstream.Counters that is not zero: reconnects,
// resumes, heartbeat_lost, resends, …), the runtime's counters, sessions
// opened and lost, watchers by kind and how the non-reading ones ended.
//
// A seed fixes the fault schedule and every worker's sequence of choices,
// not the timing: two runs of one seed are alike, not identical. To chase a
// violation, rerun its seed and dialect (with -v), shorten -duration to
// just past where it happened, and try neighbouring seeds.
//
// # Goroutines and shutdown
//
// Run starts the rig (the runtime's and gateway's goroutines, the proxy's),
// one fault scheduler and the workers, each waited for: the workers and the
// scheduler before the quiesce, the rig by its close (gateway Shutdown, hard
// after 10 s; proxy stopped; runtime closed). SIGINT or SIGTERM cancels the
// run; calls then end with it and are not judged.
package main
