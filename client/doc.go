// Package client is the Go client of sessiongate: a small wrapper over the
// generated gatewayv1 stubs that opens sessions, runs, submits, watches and
// cancels jobs with plain Go values as input and output, and turns failed
// calls into typed errors.
//
//	c, err := client.New("127.0.0.1:50051")
//	defer c.Close()
//	s, err := c.OpenSession(ctx, &gatewayv1.OpenSessionRequest{ClientName: "example"})
//	defer s.Close(ctx)
//	res, err := s.Run(ctx, "echo", map[string]any{"hello": "world"})
//	job, err := s.Submit(ctx, "stream", map[string]any{"count": 3})
//	for item, err := range s.Watch(ctx, job.ID, client.FromEventSeq(job.AfterEventSeq)) { … }
//
// Install it from a clone with a replace or a workspace (client/README.md).
//
// # Timeouts
//
// A call's deadline is its context's. Every call whose context has a deadline
// also sends it as x-timeout-ms (whole milliseconds, rounded up), unless the
// context's outgoing metadata already has an x-timeout-ms of the caller's
// own (a server budget asked for explicitly). The gateway then ends the call a
// margin before the deadline — a third of the time left, at most 100 ms — with
// DEADLINE_EXCEEDED and its timeout details, which come back as a
// *TimeoutError (profile, configured budget, time elapsed). A call with any
// time left runs; only one already past its deadline is refused. Without a
// deadline the method's timeout profile applies.
//
// # Session affinity
//
// Every session-scoped call carries the session id in the
// x-sessiongate-session request metadata, so that a balancer can route it to
// the gateway instance that owns the session; the gateway checks it against
// the request body. (The session-affine balancer itself will live in this
// package.)
//
// # The ARCP job surface
//
// SubmitJob and Run take JobOptions for the agent version (AgentVersion), a
// lease (LeaseRequest, LeaseExpiresAt) and vendor extensions (Extensions);
// their answers carry the resolved agent, the job's trace id, the granted
// lease, its expiry and the initial budget (Grant). ListJobs is an
// iter.Seq2 that follows page tokens; Subscribe attaches a session to a job
// of another of the caller's sessions. Every call sends the traceparent of
// the context's OpenTelemetry span, when it has a valid one, unless the
// outgoing metadata already has one; Traceparent sets one explicitly. The
// gateway makes its trace id the job's trace id.
//
// # Values
//
// Job input is any value encoding/json can marshal; it travels as a
// google.protobuf.Value, whose numbers are float64. Integers beyond ±2^53
// would be rounded, so they are refused rather than sent: input that cannot
// be sent is an *InputError whose Path names the value (input.ids[1]).
// Results come back as encoding/json would decode them into an any
// (map[string]any, []any, float64, string, bool, nil); RunResult.Decode
// decodes them into a value of your own type.
//
// # Watches
//
// Watch yields *WatchItem values: EventSeq and exactly one of Event, Result
// and Error (a *JobError, itself an error). A watch resumes itself: when
// its stream is cut by a hand-off, an unreachable owner, a draining gateway,
// a silent replica or a dropped connection (UNAVAILABLE; Resumable says
// which), or reset by a balancer whose replica died mid-stream (INTERNAL
// without ErrorInfo and with the RST_STREAM INTERNAL_ERROR text, as nginx
// does; StreamReset; the gateway's own INTERNAL always carries ErrorInfo and
// is never resumed), it re-opens
// the stream from the last event_seq it delivered (the gateway delivers
// exactly once from from_event_seq) after a jittered backoff, within the
// context's deadline, so the loop sees every item once, in order.
// WithoutResume turns that off. The rules live apart from the I/O in
// resume.go and are property-tested.
//
// # Retries
//
// New applies the published retry policy (timeoutprofile.RetryServiceConfig
// with its defaults: DEADLINE_EXCEEDED and UNAVAILABLE, three attempts, a
// retry budget) as the channel's default service config, unless WithoutRetry
// is given. The gateway's timeout answers are never retried: every one
// carries grpc-retry-pushback-ms: -1. Every attempt of one Run or Submit
// carries the same idempotency key (a fresh one per call unless
// IdempotencyKey gives one), so a retried attempt gets the job the first one
// created instead of running it again (see README, "Retries").
// A call that is safe to send again (the same calls as under "Frozen
// replicas" below) whose stream a balancer reset because the replica behind
// it died mid-response (INTERNAL without ErrorInfo, RST_STREAM
// INTERNAL_ERROR; StreamReset) is sent again, at most twice, with the same
// idempotency key; the gateway's own INTERNAL carries ErrorInfo and is not.
//
// # Frozen replicas
//
// A replica that is frozen (SIGSTOP, a VM pause, a stop-the-world stall)
// keeps its connections open and answers nothing, and grpc-go lets a client
// ping no more often than every 10 s. So New bounds each attempt of a unary
// call that is safe to send again (Run and Submit: every attempt carries the
// call's idempotency key; GetSessionStatus, ListSessions, ListJobs): once
// it has waited DefaultSilenceAfter (500 ms), the replica it went to is
// health-checked on a connection of the client's own, at most once per
// period per replica; no answer within DefaultSilenceTimeout (1 s) makes the
// replica silent, the attempt is abandoned and sent to another replica, and
// the balancer (RoundRobinPolicy, or AffinityPolicy) skips the silent one
// until it answers a health check again. A replica that answers is waited
// for, however long the job. The bound helps a client that knows several
// replicas (WithReplicas, or a DNS name with several addresses), or one
// behind a balancer that routes around a frozen replica. WithSilenceBound
// tunes it, WithoutSilenceBound turns it off. A WatchJob stream that has
// received nothing for DefaultSilenceAfter checks its replica the same way;
// on a silent one it ends UNAVAILABLE REPLICA_SILENT, which Watch resumes
// after, from its cursor, on another replica. Its goroutines (one per check,
// one per unary call while it waits, a timer's per quiet stream while it
// checks) end before Close returns, or with their call.
//
// # Flow control
//
// New grants the gateway a fixed HTTP/2 window (DefaultWindowBytes, 1 MiB),
// which turns off grpc-go's bandwidth probe: with one call at a time that
// probe sends a PING per call, and the gateway acks it in a write of its own
// while the call waits on the runtime. WithWindowBytes changes the window;
// WithWindowBytes(-1) restores the probe and its dynamic window.
//
// # Concurrency and shutdown
//
// A Client and its Sessions may be used by any number of goroutines. The
// package starts no goroutines of its own beyond grpc-go's; a watch's stream
// ends when its loop ends (a backoff between resumes is a timer in the
// loop's goroutine). Client.Close closes the connection New dialled;
// Session.Close(ctx) closes the session upstream and is idempotent once
// answered.
package client
