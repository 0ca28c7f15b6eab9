// Package wirecodec is the gateway's payload and message codec: the
// transcoders between a job's JSON (what an ARCP runtime sends and gets)
// and google.protobuf.Value (what the gRPC API carries), and the gRPC codec
// that carries a message as its encoded bytes.
//
// # Parts
//
//   - JSONValue reads JSON text as a Value: a strict fast reader
//     (parseValue) for the common text, then protojson, then encoding/json's
//     lenient rules (the last of duplicate keys wins).
//   - AppendJSON and AppendJSONMax write a Value as JSON text, as protojson
//     would but without its reflection, keys sorted; a Value with no kind is
//     a *ValueError naming the path, a text over the cap ErrTooLong.
//   - DecodeRunJob and AppendRunJobWire are RunJob's direct paths: the
//     request's input from its protobuf bytes straight to JSON text
//     (appendWireJSON), and the runtime's JSON result straight into the
//     answer's protobuf bytes (appendValueWire), without building a Value.
//     Each transcoder answers only where the Value path gives the same text
//     or message, and leaves everything else, every error included, to that
//     path; TestValueWireAgrees, TestWireJSONAgrees, FuzzValueWire and
//     FuzzWireJSON hold them to it (PARSE_SEED replays a random run).
//   - Codec is grpc-go's protobuf codec that also carries a *RawMessage as
//     its bytes, both ways; RawFirst and RawHandler let session methods'
//     requests reach the server's interceptors undecoded, and ScanIDs reads
//     their session and job ids from the bytes, so a call forwarded to the
//     session's owner in cluster mode is never decoded on the way.
//
// The package holds no state and starts no goroutines; every function may
// be called concurrently. It knows the sessiongate.v1 messages RunJob uses,
// and nothing of sessions, runtimes or the cluster.
package wirecodec
