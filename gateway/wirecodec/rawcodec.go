package wirecodec

import (
	"context"
	"slices"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	protov2 "google.golang.org/protobuf/proto"
)

// RawMessage is a message held as its encoded bytes: the owner's answer to
// a forwarded unary call, which the forwarding replica passes on to its
// caller as it came instead of decoding it and encoding it again (for
// RunJob, a structpb result: about 8 µs of a 59 µs hop, see the commit that
// added this file).
type RawMessage struct{ Bytes []byte }

// Codec is grpc-go's protobuf codec that also carries a *RawMessage as its
// bytes, in both directions. It is the server's codec (ForceServerCodecV2:
// a handler may answer with a *RawMessage) and a forwarded call's (a reply
// read into a *RawMessage). Its name is "proto", the content subtype of
// every call; everything that is not a *RawMessage goes to grpc-go's codec.
type Codec struct{ proto encoding.CodecV2 }

// NewCodec returns the Codec over grpc-go's registered protobuf codec.
func NewCodec() Codec { return Codec{proto: encoding.GetCodecV2(proto.Name)} }

// Name is "proto".
func (Codec) Name() string { return proto.Name }

// Marshal encodes v; a *RawMessage is its bytes.
func (c Codec) Marshal(v any) (mem.BufferSlice, error) {
	if r, ok := v.(*RawMessage); ok {
		return mem.BufferSlice{mem.SliceBuffer(r.Bytes)}, nil
	}
	return c.proto.Marshal(v)
}

// Unmarshal decodes data into v; a *RawMessage gets a copy of the bytes.
func (c Codec) Unmarshal(data mem.BufferSlice, v any) error {
	if r, ok := v.(*RawMessage); ok {
		r.Bytes = data.Materialize()
		return nil
	}
	return c.proto.Unmarshal(data, v)
}

// In cluster mode the session methods' requests reach the interceptors as
// a *RawMessage, and cluster routing reads the session and job ids from the
// bytes (ScanIDs): a call forwarded to the session's owner is sent on as
// it came, never decoded or encoded on the forwarding replica; a call served
// here is decoded by the method's handler, after routing (decodeRequest,
// with the error grpc-go gives a request it cannot decode). The other
// interceptors do not look at requests; the status probe and the methods
// that are not session-scoped keep the generated handlers.

// RawFirst returns desc with the unary handlers of methods wrapped by wrap
// where it returns one.
func RawFirst(desc *grpc.ServiceDesc, wrap func(full string, h grpc.MethodHandler) grpc.MethodHandler) *grpc.ServiceDesc {
	d := *desc
	d.Methods = slices.Clone(desc.Methods)
	for i, m := range d.Methods {
		if w := wrap("/"+desc.ServiceName+"/"+m.MethodName, m.Handler); w != nil {
			d.Methods[i].Handler = w
		}
	}
	return &d
}

// RawHandler is the handler of a session method whose request travels the
// interceptors as a *RawMessage.
func RawHandler(full string, orig grpc.MethodHandler) grpc.MethodHandler {
	return func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
		raw := &RawMessage{}
		if err := dec(raw); err != nil {
			return nil, err
		}
		final := func(ctx context.Context, req any) (any, error) {
			return orig(srv, ctx, func(v any) error { return decodeRequest(req, v) }, nil)
		}
		if interceptor == nil {
			return final(ctx, raw)
		}
		return interceptor(ctx, raw, &grpc.UnaryServerInfo{Server: srv, FullMethod: full}, final)
	}
}

// decodeRequest fills v, the handler's request message (or a *RawMessage),
// from req, the *RawMessage the interceptors passed on.
func decodeRequest(req, v any) error {
	r, ok := req.(*RawMessage)
	if to, raw := v.(*RawMessage); ok && raw {
		to.Bytes = r.Bytes // a handler that decodes the bytes itself (runJobHandler)
		return nil
	}
	pm, ok2 := v.(protov2.Message)
	if !ok || !ok2 {
		return status.Errorf(codes.Internal, "grpc: error unmarshalling request: %T into %T", req, v)
	}
	if err := protov2.Unmarshal(r.Bytes, pm); err != nil {
		return status.Errorf(codes.Internal, "grpc: error unmarshalling request: %v", err)
	}
	return nil
}

// ScanIDs reads the string fields session and job (0: none) of an encoded
// message as protobuf decodes them: the last occurrence wins. It fails on
// bytes that are not a well-formed message.
func ScanIDs(b []byte, session, job protowire.Number) (sid, jid string, err error) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return "", "", protowire.ParseError(n)
		}
		b = b[n:]
		if typ == protowire.BytesType && (num == session || num == job) {
			v, m := protowire.ConsumeBytes(b)
			if m < 0 {
				return "", "", protowire.ParseError(m)
			}
			if num == session {
				sid = string(v)
			} else {
				jid = string(v)
			}
			b = b[m:]
			continue
		}
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return "", "", protowire.ParseError(m)
		}
		b = b[m:]
	}
	return sid, jid, nil
}
