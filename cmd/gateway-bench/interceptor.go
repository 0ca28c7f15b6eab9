package main

import (
	"context"
	"runtime"
	"slices"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	sessiongatev1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
)

// interceptorResult is section 8: the timeout profile server unary
// interceptor around a bare handler, against the bare handler alone.
type interceptorResult struct {
	Method     string            `json:"method"`
	Iterations int               `json:"iterations"` // calls per round; the median of 5 rounds is reported
	Cases      []interceptorCase `json:"cases"`
	OtherCPU   float64           `json:"other_cpu"` // see point.OtherCPU
}

// interceptorCase is one kind of incoming call.
type interceptorCase struct {
	Name              string  `json:"name"`
	BareNs            float64 `json:"bare_ns_per_op"`
	InterceptedNs     float64 `json:"intercepted_ns_per_op"`
	OverheadNs        float64 `json:"overhead_ns_per_op"` // InterceptedNs − BareNs
	BareAllocs        float64 `json:"bare_allocs_per_op"`
	InterceptedAllocs float64 `json:"intercepted_allocs_per_op"`
	OverheadAllocs    float64 `json:"overhead_allocs_per_op"` // InterceptedAllocs − BareAllocs
}

// benchMethod is the method whose profile (tool_call) the interceptor applies.
const benchMethod = "/sessiongate.v1.SessionGateway/RunJob"

// benchInterceptor measures the interceptor the gateway installs (built by
// server.NewEnforcer, with its Prometheus observer) on two kinds of call, both
// with the metadata grpc-go puts in a real call's incoming context:
//
//   - no_deadline: the caller sent no deadline, so the interceptor enforces
//     the profile's default itself (its own deadline and timer);
//   - caller_deadline: the caller's deadline (5 min) is within the profile,
//     so it governs and the handler gets the incoming context.
//
// Each round times n calls of the bare handler, then n through the
// interceptor; allocations are counted from runtime.MemStats.Mallocs.
func benchInterceptor(n int) (interceptorResult, error) {
	enforcer, err := newEnforcer()
	if err != nil {
		return interceptorResult{}, err
	}
	icpt := enforcer.UnaryServerInterceptor()
	info := &grpc.UnaryServerInfo{FullMethod: benchMethod}
	resp := &sessiongatev1.RunJobResponse{JobId: "job"}
	req := &sessiongatev1.RunJobRequest{SessionId: "s1.bench.x", Agent: "echo"}
	handler := func(context.Context, any) (any, error) { return resp, nil }

	md := metadata.MD{
		":authority":   {"127.0.0.1:50051"},
		"content-type": {"application/grpc"},
		"user-agent":   {"grpc-go/1.85.0"},
	}
	base := metadata.NewIncomingContext(context.Background(), md)
	withDL, cancel := context.WithTimeout(base, 5*time.Minute)
	defer cancel()

	res := interceptorResult{Method: benchMethod, Iterations: n}
	for _, c := range []struct {
		name string
		ctx  context.Context
	}{{"no_deadline", base}, {"caller_deadline", withDL}} {
		bare := func() { _, _ = handler(c.ctx, req) }
		wrapped := func() { _, _ = icpt(c.ctx, req, info, handler) }
		res.Cases = append(res.Cases, compareOps(c.name, n, bare, wrapped))
	}
	return res, nil
}

// compareOps warms both functions up, then runs 5 rounds of n calls of
// each and reports the medians.
func compareOps(name string, n int, bare, wrapped func()) interceptorCase {
	for range 1000 {
		bare()
		wrapped()
	}
	const rounds = 5
	var bns, wns, ball, wall [rounds]float64
	for r := range rounds {
		bns[r], ball[r] = opCost(n, bare)
		wns[r], wall[r] = opCost(n, wrapped)
	}
	c := interceptorCase{
		Name:              name,
		BareNs:            median(bns[:]),
		InterceptedNs:     median(wns[:]),
		BareAllocs:        median(ball[:]),
		InterceptedAllocs: median(wall[:]),
	}
	c.OverheadNs = c.InterceptedNs - c.BareNs
	c.OverheadAllocs = c.InterceptedAllocs - c.BareAllocs
	return c
}

// opCost runs f n times and returns ns and heap allocations per call.
func opCost(n int, f func()) (ns, allocs float64) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	for range n {
		f()
	}
	elapsed := time.Since(start)
	runtime.ReadMemStats(&after)
	return nsPerOp(elapsed, n), float64(after.Mallocs-before.Mallocs) / float64(n)
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}
