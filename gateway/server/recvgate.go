package server

import (
	"context"

	"golang.org/x/sync/semaphore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
)

// What an oversized input costs, and what bounds it.
//
// grpc-go (1.85) receives a request's message when the method handler
// calls dec: parser.recvMsg reads the 5-byte prefix, refuses a length
// above the receive limit (recvLimit) at once, and otherwise asks the
// stream for that many bytes (Stream.read → requestRead, which opens the
// stream's flow-control window to the whole length) and collects them as
// they arrive, frame by frame (16 KiB each), into buffers from its pool.
// Nothing is allocated from the prefix up front; but a client that sends
// quickly makes the gateway hold the whole message, up to the receive
// limit, until it is complete and decoded. Before dec is called a stream
// holds at most its flow-control window (--grpc-window-bytes, 1 MiB).
// Decoding then copies the message once (wirecodec.RawMessage) and builds
// the input's JSON, which stops at max_input_bytes (AppendJSONMax), so a
// request refused as CAP_EXCEEDED costs about twice its size while it is
// received and decoded, and nothing after.
//
// So the receive limit times the calls receiving at once is the memory at
// stake, and the server's stream cap (1,024 per connection, connections
// unbounded) does not bound it. receiveGate does: a RunJob or SubmitJob
// call takes the receive limit's worth of --max-receiving-bytes before its
// request is received, and gives it back once the request is decoded (for
// RunJob, once its bytes are copied; its input's JSON, at most the cap, is
// built after). A decoded SubmitJob request holds its input as a
// google.protobuf.Value, which can take several times the bytes it came
// in (a long list of small numbers: about ten times) until the handler
// refuses it: that is not counted here. A
// call that finds the budget taken waits for it within its deadline (the
// budget is held for the time a request takes to arrive: microseconds for
// a request sent whole).
//
// BenchmarkOversizedInputs (recvgate_bench_test.go) sends K RunJobs of a
// 10 MB input at once over 8 connections, all refused CAP_EXCEEDED; peak
// heap in use / peak RSS of the gateway's process, 2 vCPUs, load average 8:
//
//	                        K = 16            K = 48
//	gate (256 MiB, 15 at once)  313 / 370 MiB    424 / 478 MiB
//	no gate                     365 / 430 MiB    873 / 966 MiB
//
// Without the gate memory grows with the requests sent at once (about
// 18 MiB each); with it, by the waiting streams' windows only.

// The gate is off by default (Config.MaxReceivingBytes 0). It reserves a
// call's share before the request arrives, for as long as it takes to
// arrive: a stream that sends its headers and nothing more holds a share
// until it ends, and the call is not yet authenticated then (the request
// is decoded before the interceptors run). With a 256 MiB budget, 15 such
// streams from one unauthenticated connection would make every RunJob and
// SubmitJob of the gateway wait: a worse failure than the memory it
// saves. An operator who sees large inputs arrive together, and trusts the
// callers that can reach the port, turns it on (256 MiB is a budget of 15
// requests of the default receive limit). A bound per connection would
// confine a slow sender to its own calls; not built.

// SuggestedMaxReceivingBytes is a budget for --max-receiving-bytes: 256
// MiB, 15 requests of the default receive limit (17 MiB) at a time.
const SuggestedMaxReceivingBytes = 256 << 20

// receiveGate bounds the bytes of RunJob and SubmitJob requests being
// received at once. Each call counts as the receive limit, the most it can
// make grpc-go hold.
type receiveGate struct {
	sem  *semaphore.Weighted
	each int64
}

// newReceiveGate returns the gate for a budget of total bytes, each call
// counting limit; a budget below one limit lets one call in at a time. nil
// (no gate) for a budget of 0.
func newReceiveGate(total int64, limit int) *receiveGate {
	if total <= 0 {
		return nil
	}
	each := int64(limit)
	if total < each {
		total = each
	}
	return &receiveGate{sem: semaphore.NewWeighted(total), each: each}
}

// wrap returns h with its request received under the gate (h itself when
// the gate is off: g nil). A call whose context ends while it waits ends
// with its context's status.
func (g *receiveGate) wrap(h grpc.MethodHandler) grpc.MethodHandler {
	if g == nil {
		return h
	}
	return func(srv any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
		gated := func(v any) error {
			if err := g.sem.Acquire(ctx, g.each); err != nil {
				return status.FromContextError(ctx.Err()).Err()
			}
			defer g.sem.Release(g.each)
			return dec(v)
		}
		return h(srv, ctx, gated, ic)
	}
}
