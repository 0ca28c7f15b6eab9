// Package arcp is the ARCP 1.1 wire layer: the envelope every WebSocket text
// frame carries, the payload of every message type, and their validation.
//
// It knows nothing of connections, gRPC or the gateway. Both sides of the
// protocol use it: the gateway's upstream client (package upstream) and the
// reference runtime (package arcpruntime).
//
// Decoding is liberal where the protocol's dialects differ and strict where
// correctness depends on it:
//
//   - unknown envelope and payload fields are ignored;
//   - job.result accepts the result under "result" or "output";
//   - session.close, session.closed and session.bye are all close messages
//     (see IsClose);
//   - welcome agents may be plain strings or {name, versions, default} objects;
//   - event kinds outside the standard list, such as "x-vendor.acme.trace",
//     pass through opaquely;
//   - but the version must be "1.1", id and type must be present, trace_id
//     must be 32 lowercase hex characters, and envelopes after the handshake
//     must carry session_id (Decode's Options say which checks apply).
//
// The package starts no goroutines and holds no state; every function is safe
// for concurrent use.
package arcp
