package server

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/sessiongate/sessiongate/gateway/wirecodec"
	sessiongatev1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
)

// TestRunJobHandlerRequests: runJobHandler serves the request its
// interceptors pass on. The one it decoded gets the input taken out as
// JSON; one an interceptor substitutes is served with its own input; a
// request of another type is refused, not a panic.
func TestRunJobHandlerRequests(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	ctx := context.Background()
	open, err := h.client.OpenSession(ctx, &sessiongatev1.OpenSessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	sid := open.GetSessionId()
	encode := func(in map[string]any) func(any) error {
		b, err := proto.Marshal(&sessiongatev1.RunJobRequest{SessionId: sid, Agent: "echo", Input: mustValueTB(t, in)})
		if err != nil {
			t.Fatal(err)
		}
		return func(v any) error { v.(*wirecodec.RawMessage).Bytes = b; return nil }
	}
	answer := func(resp any, err error) *sessiongatev1.RunJobResponse {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		switch m := resp.(type) {
		case *wirecodec.RawMessage:
			var r sessiongatev1.RunJobResponse
			if err := proto.Unmarshal(m.Bytes, &r); err != nil {
				t.Fatal(err)
			}
			return &r
		case *sessiongatev1.RunJobResponse:
			return m
		}
		t.Fatalf("answer of type %T", resp)
		return nil
	}
	pass := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
		return next(ctx, req)
	}
	got := answer(runJobHandler(h.gw.svc, ctx, encode(map[string]any{"a": 1.0}), pass))
	if f := got.GetResult().GetStructValue().GetFields(); f["a"].GetNumberValue() != 1 {
		t.Fatalf("the decoded request's input came back as %v", got.GetResult())
	}
	swap := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
		return next(ctx, &sessiongatev1.RunJobRequest{SessionId: sid, Agent: "echo", Input: mustValueTB(t, map[string]any{"b": "own"})})
	}
	got = answer(runJobHandler(h.gw.svc, ctx, encode(map[string]any{"a": 1.0}), swap))
	if f := got.GetResult().GetStructValue().GetFields(); f["b"].GetStringValue() != "own" || f["a"] != nil {
		t.Fatalf("a substituted request's input came back as %v", got.GetResult())
	}
	wrong := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
		return next(ctx, &sessiongatev1.CancelJobRequest{})
	}
	if _, err := runJobHandler(h.gw.svc, ctx, encode(nil), wrong); status.Code(err) != codes.Internal {
		t.Fatalf("a request of another type: %v, want INTERNAL", err)
	}
}

// TestScanIDs: the session and job ids read from the bytes are the ones
// protobuf decodes, the last occurrence winning; bytes that are not a
// message fail.
func TestScanIDs(t *testing.T) {
	mi := methodOf(sessiongatev1.SessionGateway_CancelJob_FullMethodName)
	if mi == nil || mi.sessionField == nil || mi.jobField == nil {
		t.Fatal("CancelJob has no session_id and job_id")
	}
	req := &sessiongatev1.CancelJobRequest{SessionId: "ses-1", JobId: "job-1"}
	b, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	// A second session_id, appended: decoders keep the last.
	tail, err := proto.Marshal(&sessiongatev1.CancelJobRequest{SessionId: "ses-2"})
	if err != nil {
		t.Fatal(err)
	}
	b2 := append(append([]byte(nil), b...), tail...)
	var dec sessiongatev1.CancelJobRequest
	if err := proto.Unmarshal(b2, &dec); err != nil || dec.GetSessionId() != "ses-2" {
		t.Fatalf("decoding the twice-set message: %v, %v", dec.GetSessionId(), err)
	}
	for _, c := range []struct {
		name     string
		b        []byte
		sid, jid string
		bad      bool
	}{
		{"both", b, "ses-1", "job-1", false},
		{"last wins", b2, "ses-2", "job-1", false},
		{"empty", nil, "", "", false},
		{"truncated", b[:len(b)-1], "", "", true},
		{"not a message", []byte{0xff, 0xff}, "", "", true},
	} {
		sid, jid, err := requestIDs(&wirecodec.RawMessage{Bytes: c.b}, mi)
		if (err != nil) != c.bad || sid != c.sid || jid != c.jid {
			t.Errorf("%s: %q, %q, %v; want %q, %q, error %v", c.name, sid, jid, err, c.sid, c.jid, c.bad)
		}
		if c.bad && status.Code(err) != codes.Internal {
			t.Errorf("%s: %v, want INTERNAL as grpc-go answers a request it cannot decode", c.name, err)
		}
	}
	// A decoded request gives the same ids.
	if sid, jid, err := requestIDs(req, mi); err != nil || sid != "ses-1" || jid != "job-1" {
		t.Errorf("decoded: %q, %q, %v", sid, jid, err)
	}
}
