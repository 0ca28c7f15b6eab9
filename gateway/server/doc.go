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
//     (Gateway.infra).
//
// Shutdown drains in a fixed order: health NOT_SERVING and infrastructure
// streams ended, new sessions refused and every upstream session closed
// gracefully, GracefulStop, and a hard Stop when its context ends, reported
// as ErrHardStop; then it waits for every goroutine above.
package server
