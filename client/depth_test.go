package client_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/sessiongate/sessiongate/client"
	gatewayv1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
)

// nested nests 1 in d one-element lists.
func nested(d int) any {
	var v any = 1.0
	for range d {
		v = []any{v}
	}
	return v
}

// TestInputDepth: an input nested MaxInputDepth deep runs and comes back
// intact; a deeper one — one level, or thousands — is refused before it is
// sent with the gateway's INVALID_ARGUMENT VALUE_TOO_DEEP naming the path,
// and nothing reaches the runtime.
func TestInputDepth(t *testing.T) {
	s := openSession(t, newClient(t))
	ctx := testContext(t, 30*time.Second)
	r, err := s.Run(ctx, "echo", nested(client.MaxInputDepth))
	if err != nil || !reflect.DeepEqual(r.Result, nested(client.MaxInputDepth)) {
		t.Fatalf("depth %d: %v, %v", client.MaxInputDepth, r, err)
	}
	sub0, _, err := gw.RuntimeJobs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []int{client.MaxInputDepth + 1, 5000} {
		_, err := s.Run(ctx, "echo", nested(d))
		var e *client.Error
		want := "input" + strings.Repeat("[0]", client.MaxInputDepth)
		if !errors.As(err, &e) || e.Code != codes.InvalidArgument || e.Reason != "VALUE_TOO_DEEP" || e.Metadata["field"] != want {
			t.Errorf("depth %d: %v; want INVALID_ARGUMENT VALUE_TOO_DEEP at %s", d, err, want)
		}
		if _, err := s.Submit(ctx, "echo", map[string]any{"a": nested(d)}); !errors.As(err, &e) || e.Reason != "VALUE_TOO_DEEP" {
			t.Errorf("Submit depth %d: %v", d, err)
		}
	}
	if sub1, _, _ := gw.RuntimeJobs(ctx); sub1 != sub0 {
		t.Errorf("%d submits reached the runtime", sub1-sub0)
	}
}

// nestedObject nests 1 in d objects {"a": …}.
func nestedObject(d int) any {
	var v any = 1.0
	for range d {
		v = map[string]any{"a": v}
	}
	return v
}

// TestDeepRuntimeResult: a runtime result nested deeper than the gateway's
// bound (32) — from the reference runtime's nest agent, through the gateway
// binary — reaches the caller whole. On the wire it is raw_result JSON text
// with no result Value, for RunJob and for WatchJob's result item; at the
// bound it is still a Value. The client decodes either into the same Go
// value, and Decode fills a typed destination.
func TestDeepRuntimeResult(t *testing.T) {
	ctx := testContext(t, 30*time.Second)
	s := openSession(t, newClient(t))
	conn, err := grpc.NewClient(gw.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(32<<20)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	raw := gatewayv1.NewSessionGatewayClient(conn)
	for _, c := range []struct {
		depth  int
		as     string
		want   any
		asJSON bool // raw_result, not result
	}{
		{32, "array", nested(32), false},
		{32, "object", nestedObject(32), false},
		{33, "array", nested(33), true},
		{33, "object", nestedObject(33), true},
		{3000, "array", nested(3000), true},
	} {
		in := map[string]any{"depth": c.depth, "as": c.as}
		inV, err := structpb.NewValue(in)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := raw.RunJob(ctx, &gatewayv1.RunJobRequest{SessionId: s.ID(), Agent: "nest", Input: inV})
		if err != nil {
			t.Fatalf("raw RunJob nest %d %s: %v", c.depth, c.as, err)
		}
		if got := len(resp.GetRawResult()) > 0; got != c.asJSON || (resp.GetResult() != nil) == c.asJSON {
			t.Errorf("nest %d %s: raw_result %d bytes, result set %v; want raw_result %v", c.depth, c.as,
				len(resp.GetRawResult()), resp.GetResult() != nil, c.asJSON)
		}
		if c.asJSON {
			var v any
			if err := json.Unmarshal(resp.GetRawResult(), &v); err != nil || !reflect.DeepEqual(v, c.want) {
				t.Errorf("nest %d %s: raw_result does not decode to the nesting (%v)", c.depth, c.as, err)
			}
		}

		r, err := s.Run(ctx, "nest", in)
		if err != nil {
			t.Fatalf("Run nest %d %s: %v", c.depth, c.as, err)
		}
		if !reflect.DeepEqual(jsonNumbersToFloat(r.Result), c.want) {
			t.Errorf("Run nest %d %s: the result is not the nesting", c.depth, c.as)
		}
		var typed any
		if err := r.Decode(&typed); err != nil || !reflect.DeepEqual(typed, c.want) {
			t.Errorf("Run nest %d %s: Decode: %v", c.depth, c.as, err)
		}

		job, err := s.Submit(ctx, "nest", in)
		if err != nil {
			t.Fatal(err)
		}
		var res *client.JobResult
		for it, err := range s.Watch(ctx, job.ID) {
			if err != nil {
				t.Fatalf("Watch nest %d %s: %v", c.depth, c.as, err)
			}
			if it.Result != nil {
				res = it.Result
			}
		}
		if res == nil || !reflect.DeepEqual(jsonNumbersToFloat(res.Result), c.want) {
			t.Errorf("Watch nest %d %s: result %v", c.depth, c.as, res != nil)
		}
	}
}

// jsonNumbersToFloat turns the json.Number leaves of a decoded value into
// float64, as a Value's AsInterface gives them.
func jsonNumbersToFloat(v any) any {
	switch x := v.(type) {
	case json.Number:
		f, _ := x.Float64()
		return f
	case []any:
		out := make([]any, len(x))
		for i := range x {
			out[i] = jsonNumbersToFloat(x[i])
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = jsonNumbersToFloat(e)
		}
		return out
	}
	return v
}
