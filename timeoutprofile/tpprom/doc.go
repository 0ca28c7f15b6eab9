// Package tpprom exports the SW4-002 §6 timeout metrics of package
// timeoutprofile to Prometheus. It implements timeoutprofile.Observer:
//
//	obs, err := tpprom.New(registry)
//	...
//	tp, err := timeoutprofile.New(timeoutprofile.WithObserver(obs), ...)
//
// Metrics, all labelled {profile, service, method} (service is the fully
// qualified service name, method the bare method name):
//
//   - sw4rm_rpc_timeout_total: server-side calls that ended because their
//     budget ran out.
//   - sw4rm_rpc_duration_ms: histogram of server-side call durations in
//     milliseconds (buckets from 1 ms to one hour; see WithBuckets).
//   - sw4rm_rpc_timeout_clamped_total{..., rule}: requests changed by an
//     override rule: below_min, above_max, zero_not_infinite,
//     kept_caller_deadline (client and server side).
//
// The label children of a method are looked up once, when timeoutprofile
// first resolves the method, so observing a call does not allocate. The
// package starts no goroutines.
package tpprom
