package wirecodec

import (
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	sessiongatev1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
)

// RunJob's payloads on the wire. A runtime's result reaches the gateway as
// JSON and the caller as a google.protobuf.Value; the server's handler for
// RunJob (runJobHandler in gateway/server) has runJob transcode the one into the other's
// bytes (appendValueWire) and answer with those, a *RawMessage that the
// server's codec sends as it is. The caller's input takes the opposite
// way: DecodeRunJob writes the Value's bytes as the JSON the runtime gets
// (appendWireJSON). Payloads the transcoders leave alone (not JSON,
// duplicate keys, deeper than 128, a result longer than 64 KiB or streamed
// in chunks, an encoding protobuf libraries do not write) take the Value
// path as before, and RunJob itself (the SessionGatewayServer method)
// always answers with a *RunJobResponse.

// DecodeRunJob decodes a RunJobRequest. When its input is there once and
// in the plain encoding appendWireJSON reads, input is that Value's JSON
// text and the message is decoded without it (the bytes before and after
// the field, merged: protobuf's rule for a message split between fields);
// else input is nil and the message is proto.Unmarshal's, Input included,
// for submitPayload to convert or refuse as before.
func DecodeRunJob(b []byte, max int) (req *sessiongatev1.RunJobRequest, input []byte, err error) {
	req = new(sessiongatev1.RunJobRequest)
	if start, end, v, ok := onlyField(b, runJobInputField); ok {
		if input, ok = appendWireJSON(make([]byte, 0, len(v)+16), v, max); ok &&
			proto.Unmarshal(b[:start], req) == nil && (proto.UnmarshalOptions{Merge: true}).Unmarshal(b[end:], req) == nil {
			return req, input, nil
		}
		req.Reset()
	}
	if err := proto.Unmarshal(b, req); err != nil {
		return nil, nil, status.Errorf(codes.Internal, "grpc: error unmarshalling request: %v", err)
	}
	return req, nil, nil
}

// onlyField finds the one occurrence of the length-delimited field num in
// the message b: the field's span, tag included, and its bytes. ok is
// false when the field is absent, repeated or of another wire type, or b
// is not well formed.
func onlyField(b []byte, num protowire.Number) (start, end int, v []byte, ok bool) {
	found := false
	for i := 0; i < len(b); {
		n, typ, tn := protowire.ConsumeTag(b[i:])
		if tn < 0 {
			return 0, 0, nil, false
		}
		fn := protowire.ConsumeFieldValue(n, typ, b[i+tn:])
		if fn < 0 {
			return 0, 0, nil, false
		}
		if n == num {
			if found || typ != protowire.BytesType {
				return 0, 0, nil, false
			}
			val, _ := protowire.ConsumeBytes(b[i+tn:])
			start, end, v, found = i, i+tn+fn, val, true
		}
		i += tn + fn
	}
	return start, end, v, found
}

// runJobInputField is RunJobRequest.input's field number.
var runJobInputField = (&sessiongatev1.RunJobRequest{}).ProtoReflect().Descriptor().Fields().ByName("input").Number()

// AppendRunJobWire returns resp's encoding followed by result's as its
// result field, or false when the answer has no wire form here: a result
// appendValueWire leaves alone, or a string field that is not UTF-8
// (which protobuf refuses to marshal; the Value path then fails as
// before). A field after the others is valid protobuf: decoders take
// fields in any order, and resp has no result of its own.
func AppendRunJobWire(resp *sessiongatev1.RunJobResponse, result []byte) ([]byte, bool) {
	if resp.Result != nil {
		return nil, false
	}
	b, ok := appendRunJobFields(make([]byte, 0, len(result)+192), resp)
	if !ok {
		return nil, false
	}
	b = protowire.AppendTag(b, runJobFields.result, protowire.BytesType)
	at := len(b)
	if b, ok = appendValueWire(append(b, 0), result); !ok {
		return nil, false
	}
	return closeLength(b, at), true
}

// appendRunJobFields appends resp's fields but result. The scalar ones and
// an empty lease (what a job without a lease request gets) are written
// here; the lease's capabilities, the constraints, the budget and the
// extensions, when there are any, by proto.MarshalAppend. Its reflection
// cost 3 µs of an answer in process, for fields that are mostly empty.
func appendRunJobFields(b []byte, resp *sessiongatev1.RunJobResponse) ([]byte, bool) {
	f := &runJobFields
	var ok bool
	for _, sf := range [...]struct {
		num protowire.Number
		s   string
	}{{f.jobID, resp.JobId}, {f.summary, resp.Summary}, {f.agent, resp.Agent}, {f.traceID, resp.TraceId}, {f.resultID, resp.ResultId}} {
		if b, ok = appendStringField(b, sf.num, sf.s); !ok {
			return nil, false
		}
	}
	if len(resp.RawResult) > 0 {
		b = protowire.AppendBytes(protowire.AppendTag(b, f.rawResult, protowire.BytesType), resp.RawResult)
	}
	if resp.ResultSize != 0 {
		b = protowire.AppendVarint(protowire.AppendTag(b, f.resultSize, protowire.VarintType), uint64(resp.ResultSize))
	}
	lease := resp.Lease
	if lease != nil && len(lease.GetCapabilities()) == 0 && len(lease.ProtoReflect().GetUnknown()) == 0 {
		b = append(protowire.AppendTag(b, f.lease, protowire.BytesType), 0)
		lease = nil
	}
	if lease != nil || resp.LeaseConstraints != nil || len(resp.Budget) > 0 || len(resp.Extensions) > 0 {
		rest := &sessiongatev1.RunJobResponse{Lease: lease, LeaseConstraints: resp.LeaseConstraints, Budget: resp.Budget, Extensions: resp.Extensions}
		var err error
		if b, err = (proto.MarshalOptions{}).MarshalAppend(b, rest); err != nil {
			return nil, false
		}
	}
	return b, true
}

// appendStringField appends a proto3 string field as protobuf-go does:
// nothing for "", and false for text that is not UTF-8, which it refuses.
func appendStringField(b []byte, num protowire.Number, s string) ([]byte, bool) {
	if s == "" {
		return b, true
	}
	if !utf8.ValidString(s) {
		return b, false
	}
	return protowire.AppendString(protowire.AppendTag(b, num, protowire.BytesType), s), true
}

// runJobFields are RunJobResponse's field numbers. TestRunJobFieldsKnown
// fails when the message gains a field, which appendRunJobFields would
// otherwise leave out.
var runJobFields = func() (f struct {
	jobID, result, summary, rawResult, agent, traceID, lease, resultID, resultSize protowire.Number
}) {
	fs := (&sessiongatev1.RunJobResponse{}).ProtoReflect().Descriptor().Fields()
	n := func(name protoreflect.Name) protowire.Number { return fs.ByName(name).Number() }
	f.jobID, f.result, f.summary, f.rawResult, f.agent = n("job_id"), n("result"), n("summary"), n("raw_result"), n("agent")
	f.traceID, f.lease, f.resultID, f.resultSize = n("trace_id"), n("lease"), n("result_id"), n("result_size")
	return f
}()
