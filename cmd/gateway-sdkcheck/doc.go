// Command gateway-sdkcheck checks the gateway against an ARCP runtime that
// runs on its own (one built on an official SDK, say) in the scenarios of
// issue 29, and logs every WebSocket frame between them. In one process it
// starts a frame-logging WebSocket proxy in front of -runtime and the
// gateway (gateway/server) pointed at the proxy, then runs:
//
//  1. an idempotent retry from a second and a third session of the same
//     caller, while the job runs and after it ended, and a reused key with
//     other input (want ALREADY_EXISTS);
//  2. a 20-event stream whose transport the proxy cuts after the 8th
//     event: whole, once and in order, or ended by JOB_LOST within the
//     bound;
//  3. ListJobs of two callers sharing the gateway's upstream principal
//     (bob must never see alice's jobs);
//  4. WatchJob past a finished job's end and CancelJob of it;
//  5. a 30-event stream watched from another session of its caller
//     (SubscribeJob with history, then WatchJob), the observer's transport
//     alone cut after the 8th event: whole, once and in order, or ended by
//     JOB_LOST within the bound.
//
// Without -runtime it checks the reference runtime (gateway/arcpruntime) in
// -dialect. It prints what each scenario saw and exits 1 when a promise is
// broken.
//
//	go run ./cmd/gateway-sdkcheck -dialect ts-sdk
//	go run ./cmd/gateway-sdkcheck -runtime ws://127.0.0.1:7777/arcp -frames ts.log
//
// The runtime must serve two agents: echo (the result is the input) and
// stream {count, interval_ms} (count events, interval_ms apart, then the
// result {"count": count}); it must accept the bearer token "tok". The
// proxy and the gateway listen on 127.0.0.1; the run is bounded by
// -timeout. Goroutines: the proxy's (two per transport, ended by a cut or
// at exit) and the gateway's, shut down before the command returns.
package main
