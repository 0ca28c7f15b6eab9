package timeoutprofile_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	sessiongatev1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
	"github.com/sessiongate/sessiongate/timeoutprofile"
)

var runJob = sessiongatev1.SessionGateway_RunJob_FullMethodName

// layers builds an Enforcer for RunJob (profile tool_call) with the layers
// selected: the file sets default 40 s, the environment 50 s, the client
// level (WithProfile) 60 s, the caller override 65 s.
func layers(t *testing.T, file, env, client, caller bool) *timeoutprofile.Enforcer {
	t.Helper()
	vars := map[string]string{}
	if file {
		path := filepath.Join(t.TempDir(), "p.json")
		if err := os.WriteFile(path, []byte(`{"profiles": {"tool_call": {"default_timeout_ms": 40000}}}`), 0o600); err != nil {
			t.Fatal(err)
		}
		vars["TIMEOUTPROFILE_FILE"] = path
	}
	if env {
		vars["TIMEOUTPROFILE_TOOL_CALL_DEFAULT_MS"] = "50000"
	}
	cfg, err := timeoutprofile.LoadGlobal(func(k string) string { return vars[k] })
	if err != nil {
		t.Fatal(err)
	}
	opts := []timeoutprofile.Option{
		timeoutprofile.WithConfig(cfg),
		timeoutprofile.WithCallerIdentity(func(context.Context) string { return "c" }),
	}
	if client {
		opts = append(opts, timeoutprofile.WithProfile(timeoutprofile.Profile{Name: "tool_call", Default: 60 * time.Second, Min: time.Second, Max: time.Hour, AllowInfinite: true}))
	}
	if caller {
		opts = append(opts, timeoutprofile.WithCallerProfile("c", timeoutprofile.Profile{Name: "tool_call", Default: 65 * time.Second, Min: time.Second, Max: time.Hour}))
	}
	return mustNew(t, opts...)
}

// within reports whether the deadline dl is about want after start, the
// moment just before the interceptor ran.
func within(start, dl time.Time, want time.Duration) bool {
	d := dl.Sub(start)
	return d >= want && d < want+time.Second
}

// TestPrecedenceClient: per-call > client > global (environment > file) >
// standard, as the Go client interceptor applies it.
func TestPrecedenceClient(t *testing.T) {
	for i := range 16 {
		file, env, client, perCall := i&1 != 0, i&2 != 0, i&4 != 0, i&8 != 0
		name := fmt.Sprintf("file=%v,env=%v,client=%v,percall=%v", file, env, client, perCall)
		t.Run(name, func(t *testing.T) {
			want := 30 * time.Second
			switch {
			case perCall:
				want = 70 * time.Second
			case client:
				want = 60 * time.Second
			case env:
				want = 50 * time.Second
			case file:
				want = 40 * time.Second
			}
			e := layers(t, file, env, client, false)
			var opts []grpc.CallOption
			if perCall {
				opts = append(opts, timeoutprofile.CallTimeout(70*time.Second))
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			start := time.Now()
			got := invokeClient(t, e, ctx, runJob, opts...)
			if !got.hasDL || !within(start, got.deadline, want) {
				t.Errorf("deadline leaves %v, want %v", got.deadline.Sub(start), want)
			}
			wantMD := ""
			if perCall {
				wantMD = "70000"
			}
			if got.md != wantMD {
				t.Errorf("x-timeout-ms = %q, want %q", got.md, wantMD)
			}
		})
	}
}

// TestPrecedenceServer: per-call (x-timeout-ms) > caller > client > global
// (environment > file) > standard, as the server interceptor applies it.
func TestPrecedenceServer(t *testing.T) {
	for i := range 32 {
		file, env, client, caller, perCall := i&1 != 0, i&2 != 0, i&4 != 0, i&8 != 0, i&16 != 0
		name := fmt.Sprintf("file=%v,env=%v,client=%v,caller=%v,percall=%v", file, env, client, caller, perCall)
		t.Run(name, func(t *testing.T) {
			want := 30 * time.Second
			switch {
			case perCall:
				want = 70 * time.Second
			case caller:
				want = 65 * time.Second
			case client:
				want = 60 * time.Second
			case env:
				want = 50 * time.Second
			case file:
				want = 40 * time.Second
			}
			e := layers(t, file, env, client, caller)
			md := metadata.MD{}
			if perCall {
				md.Set(timeoutprofile.MetadataKey, "70000")
			}
			ctx, cancel := context.WithCancel(metadata.NewIncomingContext(context.Background(), md))
			defer cancel()
			start := time.Now()
			dl, ok, err := serveUnary(e, ctx, runJob)
			if err != nil {
				t.Fatal(err)
			}
			if !ok || !within(start, dl, want) {
				t.Errorf("handler deadline leaves %v, want %v", dl.Sub(start), want)
			}
		})
	}
}

// TestPrecedenceBounds: a per-call request is clamped by the bounds of the
// profile the other layers produce.
func TestPrecedenceBounds(t *testing.T) {
	tight := timeoutprofile.Profile{Name: "tool_call", Default: 20 * time.Second, Min: 10 * time.Second, Max: 40 * time.Second}
	cases := []struct {
		name string
		opts []timeoutprofile.Option
		req  time.Duration
		want time.Duration
	}{
		{"standard max", nil, 2 * time.Hour, time.Hour},
		{"client max", []timeoutprofile.Option{timeoutprofile.WithProfile(tight)}, 2 * time.Hour, 40 * time.Second},
		{"client min", []timeoutprofile.Option{timeoutprofile.WithProfile(tight)}, time.Second, 10 * time.Second},
		{"client not infinite", []timeoutprofile.Option{timeoutprofile.WithProfile(tight)}, 0, 20 * time.Second},
		{"caller max", []timeoutprofile.Option{
			timeoutprofile.WithCallerIdentity(func(context.Context) string { return "c" }),
			timeoutprofile.WithCallerProfile("c", tight)}, 2 * time.Hour, 40 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := mustNew(t, tc.opts...)
			md := metadata.Pairs(timeoutprofile.MetadataKey, strconv.FormatInt(tc.req.Milliseconds(), 10))
			ctx, cancel := context.WithCancel(metadata.NewIncomingContext(context.Background(), md))
			defer cancel()
			start := time.Now()
			dl, ok, err := serveUnary(e, ctx, runJob)
			if err != nil || !ok || !within(start, dl, tc.want) {
				t.Errorf("deadline %v (ok=%v, err=%v), want %v", dl.Sub(start), ok, err, tc.want)
			}
		})
	}
}

type clientCall struct {
	deadline time.Time
	hasDL    bool
	md       string
	opts     []grpc.CallOption
}

// invokeClient runs the unary client interceptor with an invoker that
// records what it was given.
func invokeClient(t *testing.T, e *timeoutprofile.Enforcer, ctx context.Context, method string, opts ...grpc.CallOption) clientCall {
	t.Helper()
	var got clientCall
	err := e.UnaryClientInterceptor()(ctx, method, nil, nil, nil,
		func(ctx context.Context, _ string, _, _ any, _ *grpc.ClientConn, opts ...grpc.CallOption) error {
			got.deadline, got.hasDL = ctx.Deadline()
			md, _ := metadata.FromOutgoingContext(ctx)
			if v := md.Get(timeoutprofile.MetadataKey); len(v) > 0 {
				got.md = v[0]
			}
			got.opts = opts
			return nil
		}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// serveUnary runs the unary server interceptor with a handler that reports
// its context's deadline.
func serveUnary(e *timeoutprofile.Enforcer, ctx context.Context, method string) (time.Time, bool, error) {
	var dl time.Time
	var ok bool
	_, err := e.UnaryServerInterceptor()(ctx, nil, &grpc.UnaryServerInfo{FullMethod: method},
		func(ctx context.Context, _ any) (any, error) {
			dl, ok = ctx.Deadline()
			return nil, nil
		})
	return dl, ok, err
}
