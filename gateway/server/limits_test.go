package server

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	sessiongatev1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
)

// TestLimitsAligned, with the default limits: an input of 10 MB — above
// max_input_bytes (8 MiB) and above gRPC's old receive limit of cap + 1 MiB
// — gets RESOURCE_EXHAUSTED CAP_EXCEEDED naming max_input_bytes, not gRPC's
// bare "larger than max"; an input of twice the cap still does; and a 7 MB
// result reaches a caller that accepts 32 MiB (as the clients do).
func TestLimitsAligned(t *testing.T) {
	h := newHarness(t, harnessOpts{dial: []grpc.DialOption{
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(32<<20), grpc.MaxCallSendMsgSize(64<<20)),
	}})
	ctx := ctxT(t, 60*time.Second)
	id := h.open(t, ctx)
	for _, n := range []int{10_000_000, 16 << 20} {
		_, err := h.client.RunJob(ctx, &sessiongatev1.RunJobRequest{SessionId: id, Agent: "echo",
			Input: structpb.NewStringValue(strings.Repeat("x", n))})
		ei := errorInfo(err)
		if status.Code(err) != codes.ResourceExhausted || ei.GetReason() != "CAP_EXCEEDED" || ei.GetMetadata()["cap"] != "max_input_bytes" ||
			!strings.Contains(err.Error(), "max_input_bytes=8388608") {
			t.Errorf("%d-byte input: %v (ErrorInfo %v); want RESOURCE_EXHAUSTED CAP_EXCEEDED naming max_input_bytes", n, err, ei)
		}
	}
	const n = 7_000_000
	resp, err := h.client.RunJob(ctx, &sessiongatev1.RunJobRequest{SessionId: id, Agent: "echo",
		Input: structpb.NewStringValue(strings.Repeat("y", n))})
	if err != nil {
		t.Fatalf("7 MB echo: %v", err)
	}
	if got := len(resp.GetResult().GetStringValue()); got != n {
		t.Errorf("7 MB echo returned %d bytes", got)
	}
}
