// Package server is the gateway's gRPC edge: it serves
// sessiongate.v1.SessionGateway over the session table and the upstream ARCP
// connections, plus timeoutprofile.v1.TimeoutProfileService, grpc.health.v1
// and server reflection, and the admin HTTP handler (/metrics, /healthz and
// the HTTP session status probe, which answers in protojson like gRPC JSON
// tools).
//
// It is the only package of the gateway that imports generated code, and the
// only place where errors become gRPC statuses (toStatus): ARCP codes map to
// gRPC codes with an ErrorInfo{reason: <ARCP code>, domain: "arcp",
// metadata: {retryable}}; a job's own failure maps by jobCode, never to a
// code that reads as a gateway fault; the gateway's own conditions carry
// ErrorInfo{domain: "sessiongate"}, budgets (gateway/budget) as
// RESOURCE_EXHAUSTED CAP_EXCEEDED naming the budget. Internal error text
// never reaches callers.
//
// Interceptors run in this order: Prometheus server metrics, logging
// (slog; not for liveness probes), panic recovery, authentication (bearer
// tokens naming the caller; not for grpc.health.v1.Health, so probes need no
// credentials), then the timeout profiles (for every call but health Watch
// and reflection, which instead end when Shutdown begins: endAtShutdown), so
// a timeout profile can vary by caller.
//
// # Payloads
//
// A job's input and result are JSON upstream and google.protobuf.Value on
// the API; gateway/wirecodec converts between the two. RunJob does it
// without building the Value when the payload allows it: the request's
// input is written as JSON straight from its protobuf bytes
// (wirecodec.DecodeRunJob, in runJobHandler) and the result's JSON straight
// into the answer's bytes (wirecodec.AppendRunJobWire), which the server's
// codec (wirecodec.Codec) sends as they are (a *wirecodec.RawMessage).
//
// # Budgets
//
// Sessions (in the session table), live jobs (here: a unit from submit until
// the job ends upstream) and retained bytes (an Account per session, for the
// upstream connection) are budgets with a gateway-wide and a per-caller cap.
//
// # Cluster ownership
//
// In cluster mode (ClusterConfig) every ownership decision is taken by the
// sans-IO core cluster.Ownership (see gateway/cluster, doc.go, its rule
// table); cluster.go only gathers its facts and carries its actions out.
// The loop (every AckEvery) feeds it the directory lease's news
// (LeaseValidUntil moved: refreshed; LeaseFailures moved: outage) and the
// directory's incarnation marker, then makes the writes it calls due
// (claims, restores after a flush, tokens, epoch confirmations after a
// lapse; 32 at a time) and the acked seqs; a write refused by epoch fences
// the session (detached silently). The sweep (every SweepEvery, and at
// Ownership.NextJudgement, the moment a peer's lease would have been gone a
// full TTL) gives it the peers' leases (Directory.Peers), claims the
// orphans the owner index names (Directory.OrphansOf) of the replicas the
// core judges gone, each first by its rendezvous-preferred replica, 256 per
// script call (Directory.TakeoverMany), and queues their upstream resumes
// (64 at a time, in the background; a call for a claimed session not yet
// resumed resumes it at once, and the hand-off releases those left); then it
// hands off, bounded per second, idle sessions whose preferred replica is
// another (rebalance). A call is routed by cluster.Route and, for a
// takeover, cluster.Ownership.MayTakeOver (UNAVAILABLE OWNER_SUSPECT while
// the owner's absence is not yet judged); a write on a held session whose
// epoch the core does not confirm is UNAVAILABLE LEASE_LAPSED; an upstream
// resume waits for the core (upstream.Config.ResumeGate).
//
// Hooks for availability work (lame-duck drain, forwarding that re-reads
// the directory): Ownership.Valid and MayServe say whether this replica may
// serve; Ownership.Dead and MayTakeOver whether a peer is judged gone;
// cluster.Preferred where a session belongs; the decisions are counted by
// sessiongate_cluster_ownership_decisions_total{decision}.
//
// # Availability: unsent forwards, silent owners, the lame duck
//
// (cluster_forward.go.) A forward's request is marked sent when grpc-go
// hands its headers to a live peer transport (a stats handler on peer
// connections). A forward never sent (listener closed, dial refused) and
// one sent but without the owner's response header within PeerFirstByte
// (the owner sends that header before it runs the handler of a forwarded
// call) cannot have run anything: the cached owner is dropped and the call
// routed again from the directory; routed to another replica it goes at
// once, to the same one (its lease still live) or into OWNER_SUSPECT /
// LEASE_LAPSED after a pause (20 ms doubling to 200 ms), for at most
// OwnerWait and never into the last tenth (≥ 250 ms) of the caller's
// deadline; then the last answer, UNAVAILABLE, goes to the caller. An
// owner whose forward got no header is marked silent until one answers
// (silentPeers, also marked when the watchdog closes its connection): a
// call for its sessions then reads the directory, not the owner cache,
// and once less than PeerFirstByte is left of its lease waits for the
// lease's end (cluster.Await, CallWait.PauseUntil) rather than forward
// into it again, so the takeover that follows is not held back. Answers
// of a peer's routing (NOT_OWNER, DRAINING, OWNER_SUSPECT, LEASE_LAPSED)
// are re-routed the same way. A forward that broke after the owner's
// header is never sent again: its outcome is unknown (UNAVAILABLE
// OWNER_UNREACHABLE). While forwards the owner took are in flight, a
// watchdog per peer (one goroutine, ended when none is left, awaited by
// close) calls the peer's health Check every PeerKeepalive, bounded by as
// long; a peer that does not answer (SIGSTOP, a VM pause) has its
// connection closed, which ends those forwards (one on it still waiting for
// the owner's header is routed again: the owner had not started it). Shutdown in cluster mode:
// health NOT_SERVING and GOAWAY to every connection (a second gRPC server
// takes the listener over while the first stops gracefully: lameduck.go),
// hand-off (a unary call admitted after it began detaching is routed
// again instead of served, as is one whose handler found its session
// detached before reaching the runtime), then LameDuck in which calls are
// still accepted and forwarded to the adopters (peers' caches and
// balancers move away meanwhile), then the streams this replica relays
// are cut with UNAVAILABLE DRAINING and ErrorInfo from_event_seq, then the
// listener is closed and the second server stops gracefully. A WatchJob of
// a handed-off session ends UNAVAILABLE SESSION_HANDED_OFF with
// from_event_seq too.
//
// # Goroutines and shutdown
//
// Serve blocks serving gRPC. Upstream connections own their goroutines.
// Three kinds of goroutine are started here, each waited for by Shutdown:
//   - a WatchJob stream's sender, which runs its Sends so that the handler
//     can return at a stream limit even while a Send is blocked in flow
//     control by a client that stopped reading (the handler's return ends
//     the stream, which unblocks the Send; service.bg);
//   - a job's live-job holder, which waits for the end of a job submitted by
//     SubmitJob (or abandoned by RunJob) and then gives its unit back; it
//     ends at the latest when the session ends (service.bg);
//   - the handler of a health Watch or reflection stream, run apart so that
//     the stream can end at shutdown though reflection blocks in Recv
//     (Gateway.infra);
//   - in cluster mode, the directory loop (stopped and awaited by Shutdown
//     before the hand-off), and within one of its passes the bounded
//     workers of its writes, each pass waiting for its own; the
//     background resumes of claimed sessions (one goroutine per claimed
//     session, 64 resuming at once), released by the hand-off and awaited
//     when the cluster state closes; a watchdog per peer with forwards in
//     flight (awaited by the cluster's close, at the end of Shutdown); the
//     listener's accept goroutine (lameduck.go's acceptMux, ended and
//     awaited when Shutdown closes the listener), the lame duck's server
//     (its Serve awaited by Serve) and the first server's GracefulStop
//     (awaited by Shutdown).
//
// Shutdown drains in a fixed order: health NOT_SERVING and infrastructure
// streams ended, new sessions refused and every upstream session closed
// gracefully, GracefulStop, and a hard Stop when its context ends, reported
// as ErrHardStop; then it waits for every goroutine above.
package server
