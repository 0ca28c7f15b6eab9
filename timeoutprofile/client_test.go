package timeoutprofile_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	sessiongatev1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
	"github.com/sessiongate/sessiongate/timeoutprofile"
)

func TestUnaryClientInterceptor(t *testing.T) {
	getStatus := sessiongatev1.SessionGateway_GetSessionStatus_FullMethodName // heartbeat: 5 s, 1–30 s
	const none = time.Duration(-1)
	cases := []struct {
		name     string
		method   string
		callerDL time.Duration
		call     time.Duration // CallTimeout; none: no option
		wantDL   time.Duration // none: no deadline
		wantMD   string
		rule     timeoutprofile.Rule
	}{
		{"no deadline: default", getStatus, none, none, 5 * time.Second, "", timeoutprofile.RuleNone},
		{"caller deadline kept", getStatus, 10 * time.Second, none, 10 * time.Second, "", timeoutprofile.RuleNone},
		{"caller deadline above max shortened", getStatus, time.Minute, none, 30 * time.Second, "", timeoutprofile.RuleAboveMax},
		{"caller deadline below min kept", getStatus, 300 * time.Millisecond, none, 300 * time.Millisecond, "", timeoutprofile.RuleKeptCallerDeadline},
		{"call option", getStatus, none, 2 * time.Second, 2 * time.Second, "2000", timeoutprofile.RuleNone},
		{"call option clamped up", getStatus, none, 10 * time.Millisecond, time.Second, "1000", timeoutprofile.RuleBelowMin},
		{"call option clamped down", getStatus, none, time.Hour, 30 * time.Second, "30000", timeoutprofile.RuleAboveMax},
		{"call option bounded by caller deadline", getStatus, 3 * time.Second, 20 * time.Second, 3 * time.Second, "20000", timeoutprofile.RuleNone},
		{"call option 0, not infinite", getStatus, none, 0, 5 * time.Second, "5000", timeoutprofile.RuleZeroNotInfinite},
		{"call option 0, infinite", runJob, none, 0, none, "0", timeoutprofile.RuleNone},
		{"call option 0, infinite, caller deadline stays", runJob, 3 * time.Second, 0, 3 * time.Second, "0", timeoutprofile.RuleNone},
		{"call option rounded up to ms", getStatus, none, 1500*time.Millisecond + time.Microsecond, 1501 * time.Millisecond, "1501", timeoutprofile.RuleNone},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obs := newTestObserver()
			e := mustNew(t, timeoutprofile.WithObserver(obs))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			start := time.Now()
			if tc.callerDL != none {
				ctx, cancel = context.WithDeadline(ctx, start.Add(tc.callerDL))
				defer cancel()
			}
			var opts []grpc.CallOption
			if tc.call != none {
				opts = append(opts, timeoutprofile.CallTimeout(tc.call), grpc.WaitForReady(true))
			}
			got := invokeClient(t, e, ctx, tc.method, opts...)
			if tc.wantDL == none {
				if got.hasDL {
					t.Errorf("deadline set: %v", got.deadline.Sub(start))
				}
			} else if !got.hasDL || !within(start, got.deadline, tc.wantDL) {
				t.Errorf("deadline %v (set=%v), want %v", got.deadline.Sub(start), got.hasDL, tc.wantDL)
			}
			if got.md != tc.wantMD {
				t.Errorf("x-timeout-ms = %q, want %q", got.md, tc.wantMD)
			}
			for _, o := range got.opts {
				if tc.call != none && o == timeoutprofile.CallTimeout(tc.call) {
					t.Errorf("CallTimeout reached the invoker")
				}
			}
			if tc.call != none && len(got.opts) != 1 {
				t.Errorf("invoker got %d options, want the other 1", len(got.opts))
			}
			if n := obs.clamps(tc.rule); tc.rule != timeoutprofile.RuleNone && n != 1 {
				t.Errorf("rule %v counted %d times", tc.rule, n)
			}
		})
	}
}

type fakeClientStream struct {
	grpc.ClientStream
	ctx  context.Context
	msgs int
}

func (s *fakeClientStream) RecvMsg(any) error {
	if s.msgs == 0 {
		return io.EOF
	}
	s.msgs--
	return nil
}

func TestStreamClientInterceptor(t *testing.T) {
	watch := sessiongatev1.SessionGateway_WatchJob_FullMethodName // tool_call, with a policy
	cases := []struct {
		name   string
		method string
		opts   []grpc.CallOption
		wantDL time.Duration // 0: none
		wantMD string
	}{
		{"policy: no default deadline", watch, nil, 0, ""},
		{"policy with call option", watch, []grpc.CallOption{timeoutprofile.CallTimeout(2 * time.Second)}, 2 * time.Second, "2000"},
		{"policy with infinite call option", watch, []grpc.CallOption{timeoutprofile.CallTimeout(0)}, 0, "0"},
		{"no policy: default deadline", "/acme.v1.Thing/Stream", nil, 30 * time.Second, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := mustNew(t)
			var fs *fakeClientStream
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			start := time.Now()
			cs, err := e.StreamClientInterceptor()(ctx, &grpc.StreamDesc{ServerStreams: true}, nil, tc.method,
				func(ctx context.Context, _ *grpc.StreamDesc, _ *grpc.ClientConn, _ string, _ ...grpc.CallOption) (grpc.ClientStream, error) {
					fs = &fakeClientStream{ctx: ctx, msgs: 2}
					return fs, nil
				}, tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			dl, ok := fs.ctx.Deadline()
			if tc.wantDL == 0 && ok {
				t.Errorf("deadline set: %v", dl.Sub(start))
			}
			if tc.wantDL != 0 && (!ok || !within(start, dl, tc.wantDL)) {
				t.Errorf("deadline %v, want %v", dl.Sub(start), tc.wantDL)
			}
			md, _ := metadata.FromOutgoingContext(fs.ctx)
			if got := md.Get(timeoutprofile.MetadataKey); tc.wantMD == "" && len(got) != 0 || tc.wantMD != "" && (len(got) != 1 || got[0] != tc.wantMD) {
				t.Errorf("x-timeout-ms = %q, want %q", got, tc.wantMD)
			}
			for cs.RecvMsg(nil) == nil {
			}
			if ok && fs.ctx.Err() != context.Canceled {
				t.Errorf("the interceptor's deadline was not released at the end of the stream: %v", fs.ctx.Err())
			}
		})
	}
}

func TestStreamClientInterceptorError(t *testing.T) {
	e := mustNew(t)
	var sctx context.Context
	boom := errors.New("boom")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err := e.StreamClientInterceptor()(ctx, &grpc.StreamDesc{}, nil, "/acme.v1.Thing/Stream",
		func(ctx context.Context, _ *grpc.StreamDesc, _ *grpc.ClientConn, _ string, _ ...grpc.CallOption) (grpc.ClientStream, error) {
			sctx = ctx
			return nil, boom
		})
	if err != boom || sctx.Err() != context.Canceled {
		t.Errorf("err %v, stream context %v", err, sctx.Err())
	}
}
