package client_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/sessiongate/sessiongate/client"
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
