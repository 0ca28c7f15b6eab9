package server

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/sessiongate/sessiongate/gateway/arcp"
	"github.com/sessiongate/sessiongate/gateway/upstream"
	sessiongatev1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
)

// nestJSON nests a scalar in d containers: objects under key "a" or
// one-element arrays.
func nestJSON(kind string, d int) string {
	if kind == "list" {
		return strings.Repeat("[", d) + "1" + strings.Repeat("]", d)
	}
	return strings.Repeat(`{"a":`, d) + "1" + strings.Repeat("}", d)
}

// nestValue is nestJSON as a google.protobuf.Value.
func nestValue(kind string, d int) *structpb.Value {
	v := structpb.NewNumberValue(1)
	for range d {
		if kind == "list" {
			v = structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{v}})
		} else {
			v = structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{"a": v}})
		}
	}
	return v
}

func TestJSONTooDeep(t *testing.T) {
	for _, c := range []struct {
		raw  string
		max  int
		path string
		deep bool
	}{
		{`1`, 0, "", false},
		{`[]`, 0, "", true},
		{`[1,[2]]`, 1, "[1]", true},
		{`{"a":1,"b":{"c":[0,1,{"d":1}]}}`, 3, ".b.c[2]", true},
		{`{"a":1,"b":{"c":[0,1,{"d":1}]}}`, 4, "", false},
		{`{"a]":"[[[[","b":["}}}",{"x\"y":{}}]}`, 3, `.b[1].x\"y`, true},
		{`["[","{"]`, 1, "", false},
		{nestJSON("list", MaxValueDepth), MaxValueDepth, "", false},
		{nestJSON("object", MaxValueDepth+1), MaxValueDepth, strings.Repeat(".a", MaxValueDepth), true},
		{`[[[`, 5, "", false}, // malformed: its parser reports it
	} {
		path, deep := jsonTooDeep([]byte(c.raw), c.max)
		if path != c.path || deep != c.deep {
			t.Errorf("jsonTooDeep(%s, %d) = %q, %v; want %q, %v", c.raw, c.max, path, deep, c.path, c.deep)
		}
	}
}

// TestInputDepthBound: an input nested MaxValueDepth deep runs and comes
// back as a Value; one level deeper is INVALID_ARGUMENT VALUE_TOO_DEEP
// naming the path, before anything reaches the runtime; an absurd depth
// (past protobuf-go's recursion limit) is INVALID_ARGUMENT too, not
// INTERNAL, and the session survives all of it.
func TestInputDepthBound(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	ctx := ctxT(t, 30*time.Second)
	id := h.open(t, ctx)
	for _, kind := range []string{"list", "object"} {
		resp, err := h.client.RunJob(ctx, &sessiongatev1.RunJobRequest{SessionId: id, Agent: "echo", Input: nestValue(kind, MaxValueDepth)})
		if err != nil || resp.GetResult() == nil || len(resp.GetRawResult()) > 0 {
			t.Fatalf("%s of depth %d: %v, %v; want the echo as a Value", kind, MaxValueDepth, resp, err)
		}
		before := h.rt.Runtime().Stats().JobsSubmitted
		_, err = h.client.RunJob(ctx, &sessiongatev1.RunJobRequest{SessionId: id, Agent: "echo", Input: nestValue(kind, MaxValueDepth+1)})
		ei := errorInfo(err)
		want := "input" + strings.Repeat(map[string]string{"list": "[0]", "object": ".a"}[kind], MaxValueDepth)
		if status.Code(err) != codes.InvalidArgument || ei.GetReason() != "VALUE_TOO_DEEP" || ei.GetMetadata()["field"] != want {
			t.Errorf("%s of depth %d: %v (%v); want INVALID_ARGUMENT VALUE_TOO_DEEP at %s", kind, MaxValueDepth+1, err, ei, want)
		}
		_, err = h.client.SubmitJob(ctx, &sessiongatev1.SubmitJobRequest{SessionId: id, Agent: "echo", Input: nestValue(kind, MaxValueDepth+1)})
		if errorInfo(err).GetReason() != "VALUE_TOO_DEEP" {
			t.Errorf("SubmitJob %s of depth %d: %v", kind, MaxValueDepth+1, err)
		}
		if got := h.rt.Runtime().Stats().JobsSubmitted; got != before {
			t.Errorf("%d submits reached the runtime for inputs too deep", got-before)
		}
	}
	for _, d := range []int{5000, 20000} {
		_, err := h.client.RunJob(ctx, &sessiongatev1.RunJobRequest{SessionId: id, Agent: "echo", Input: nestValue("list", d)})
		if status.Code(err) != codes.InvalidArgument || errorInfo(err).GetReason() != "VALUE_TOO_DEEP" {
			t.Errorf("RunJob of depth %d: %v; want INVALID_ARGUMENT VALUE_TOO_DEEP", d, err)
		}
		_, err = h.client.SubmitJob(ctx, &sessiongatev1.SubmitJobRequest{SessionId: id, Agent: "echo", Input: nestValue("object", d)})
		if status.Code(err) != codes.InvalidArgument || errorInfo(err).GetReason() != "VALUE_TOO_DEEP" {
			t.Errorf("SubmitJob of depth %d: %v; want INVALID_ARGUMENT VALUE_TOO_DEEP", d, err)
		}
	}
	st, err := h.client.GetSessionStatus(ctx, &sessiongatev1.GetSessionStatusRequest{SessionId: id})
	if err != nil || st.GetStatus() != sessiongatev1.SessionStatus_SESSION_STATUS_LIVE {
		t.Fatalf("session after the deep inputs: %v, %v", st, err)
	}
	if _, err := h.client.RunJob(ctx, &sessiongatev1.RunJobRequest{SessionId: id, Agent: "echo", Input: structpb.NewStringValue("still here")}); err != nil {
		t.Errorf("RunJob after the deep inputs: %v", err)
	}
}

// TestDeepResultTravelsRaw: a runtime's result, event body or error details
// nested deeper than MaxValueDepth reach the caller as JSON text in the
// raw_* field, which every client decodes, never as a Value some cannot.
func TestDeepResultTravelsRaw(t *testing.T) {
	deep := json.RawMessage(nestJSON("object", MaxValueDepth+1))
	ok := json.RawMessage(nestJSON("object", MaxValueDepth))
	if v, raw := valueOrRaw(deep); v != nil || string(raw) != string(deep) {
		t.Errorf("valueOrRaw(depth %d) = %v, %q; want the raw text", MaxValueDepth+1, v, raw)
	}
	if v, raw := valueOrRaw(ok); v == nil || raw != nil {
		t.Errorf("valueOrRaw(depth %d) = %v, %q; want a Value", MaxValueDepth, v, raw)
	}
	ev := watchItem(upstream.Item{Seq: 1, Event: &arcp.Event{Kind: "log", Body: deep}})
	if e := ev.GetEvent(); e.GetBody() != nil || string(e.GetRawBody()) != string(deep) {
		t.Errorf("event body of depth %d: %v", MaxValueDepth+1, e)
	}
	res := watchItem(upstream.Item{Seq: 2, Result: &arcp.Result{Result: deep}})
	if r := res.GetResult(); r.GetResult() != nil || string(r.GetRawResult()) != string(deep) {
		t.Errorf("result of depth %d: %v", MaxValueDepth+1, r)
	}
	if ext := extensionsProto(map[string]json.RawMessage{"x-vendor.deep": deep, "x-vendor.ok": ok}); len(ext) != 1 || ext["x-vendor.ok"] == nil {
		t.Errorf("extensions: %v; want the deep one left out", ext)
	}
}
