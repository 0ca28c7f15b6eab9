// Package server is the gateway's gRPC edge: it serves
// sessiongate.v1.SessionGateway over the session table and the upstream ARCP
// connections, plus timeoutprofile.v1.TimeoutProfileService, grpc.health.v1
// and server reflection, and the admin HTTP handler (/metrics, /healthz and
// the HTTP session status probe).
//
// It is the only package of the gateway that imports generated code, and the
// only place where errors become gRPC statuses (toStatus): ARCP codes map to
// gRPC codes with an ErrorInfo{reason: <ARCP code>, domain: "arcp",
// metadata: {retryable}}; the gateway's own conditions carry
// ErrorInfo{domain: "sessiongate"}. Internal error text never reaches callers.
//
// Interceptors run in this order: Prometheus server metrics, logging
// (slog), panic recovery, authentication (bearer tokens naming the caller),
// then the interceptors the configuration adds (the timeout profiles), so a
// timeout profile can vary by caller.
//
// # Goroutines and shutdown
//
// Serve blocks serving gRPC. Handlers start no goroutines; upstream
// connections own theirs. Shutdown drains in a fixed order: health
// NOT_SERVING, refuse new sessions and close every upstream session
// gracefully, GracefulStop, and a hard Stop when its context ends.
package server
