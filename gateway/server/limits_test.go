package server

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

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

// TestInputOverReceiveLimit: a RunJob or SubmitJob request larger than the
// gRPC receive limit (twice max_input_bytes plus 1 MiB) is refused by
// grpc-go from its length prefix with RESOURCE_EXHAUSTED naming the limit;
// the gateway cannot add ErrorInfo there (see recvLimit). The session
// keeps working. If grpc-go ever lets the
// status be replaced, this test fails on the missing ErrorInfo check and
// the gateway should name max_input_bytes as it does under the limit.
func TestInputOverReceiveLimit(t *testing.T) {
	const limit = 1 << 20 // receive limit 3 MiB
	h := newHarness(t, harnessOpts{
		config: func(c *Config) { c.MaxInputBytes = limit },
		dial:   []grpc.DialOption{grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(64 << 20))},
	})
	ctx := ctxT(t, 60*time.Second)
	id := h.open(t, ctx)
	in := structpb.NewStringValue(strings.Repeat("x", 4<<20))
	check := func(what string, err error) {
		t.Helper()
		want := fmt.Sprintf("grpc: received message larger than max (4194355 vs. %d)", recvLimit(limit))
		if status.Code(err) != codes.ResourceExhausted || status.Convert(err).Message() != want || errorInfo(err) != nil {
			t.Errorf("%s of 4 MiB: %v; want grpc-go's RESOURCE_EXHAUSTED %q", what, err, want)
		}
	}
	_, err := h.client.RunJob(ctx, &sessiongatev1.RunJobRequest{SessionId: id, Agent: "echo", Input: in})
	check("RunJob", err)
	_, err = h.client.SubmitJob(ctx, &sessiongatev1.SubmitJobRequest{SessionId: id, Agent: "echo", Input: in})
	check("SubmitJob", err)
	resp, err := h.client.RunJob(ctx, &sessiongatev1.RunJobRequest{SessionId: id, Agent: "echo", Input: structpb.NewStringValue("ok")})
	if err != nil || resp.GetResult().GetStringValue() != "ok" {
		t.Fatalf("echo after the refusals: %v, %v", resp, err)
	}
}

// TestReceiveGate: a RunJob whose request is still arriving holds the
// receive limit's worth of --max-receiving-bytes, so with a budget of one
// limit a second RunJob waits for it within its deadline and no job runs;
// once the first caller gives up (RST_STREAM), the second runs. Without the
// gate the second RunJob is answered at once, whatever the first holds.
func TestReceiveGate(t *testing.T) {
	const limit = 1 << 20 // receive limit 3 MiB
	h := newHarness(t, harnessOpts{config: func(c *Config) {
		c.MaxInputBytes = limit
		c.MaxReceivingBytes = 1 // one request at a time
	}})
	ctx := ctxT(t, 60*time.Second)
	id := h.open(t, ctx)

	// A raw HTTP/2 client declares a 2 MiB RunJob request and sends 100
	// bytes of it.
	nc, err := net.Dial("tcp", h.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, err := nc.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(nc, nc)
	go func() { // read and drop the server's frames; the framer's writes need no reader
		for {
			if _, err := fr.ReadFrame(); err != nil {
				return
			}
		}
	}()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", sessiongatev1.SessionGateway_RunJob_FullMethodName},
		{":authority", h.addr}, {"content-type", "application/grpc"}, {"te", "trailers"}} {
		if err := enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]}); err != nil {
			t.Fatal(err)
		}
	}
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	if err := fr.WriteData(1, false, append([]byte{0, 0, 0x20, 0, 0}, make([]byte, 100)...)); err != nil {
		t.Fatal(err)
	}
	// Wait until that request holds the gate.
	held := ctxT(t, 10*time.Second)
	for h.gw.recvGate.sem.TryAcquire(1) {
		h.gw.recvGate.sem.Release(1)
		if held.Err() != nil {
			t.Fatal("the raw request never reached the gate")
		}
		runtime.Gosched()
	}
	wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = h.client.RunJob(wctx, &sessiongatev1.RunJobRequest{SessionId: id, Agent: "echo", Input: structpb.NewStringValue("waits")})
	cancel()
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("RunJob while another request is being received: %v; want DEADLINE_EXCEEDED waiting for the receive budget", err)
	}
	if err := fr.WriteRSTStream(1, http2.ErrCodeCancel); err != nil {
		t.Fatal(err)
	}
	resp, err := h.client.RunJob(ctx, &sessiongatev1.RunJobRequest{SessionId: id, Agent: "echo", Input: structpb.NewStringValue("runs")})
	if err != nil || resp.GetResult().GetStringValue() != "runs" {
		t.Fatalf("RunJob after the first request was cancelled: %v, %v", resp, err)
	}
}
