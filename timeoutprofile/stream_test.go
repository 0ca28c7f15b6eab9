package timeoutprofile_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sessiongatev1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
	"github.com/sessiongate/sessiongate/timeoutprofile"
)

type watchStream = grpc.ServerStreamingServer[sessiongatev1.WatchJobResponse]

// streamToolCall leaves room for messages to flow before a limit fires,
// even on a loaded machine.
var streamToolCall = timeoutprofile.Profile{Name: "tool_call", Default: 400 * time.Millisecond, Min: 10 * time.Millisecond, Max: time.Second, AllowInfinite: true}

// sendEvery sends two messages, then one every d until sending fails or the stream's
// context ends, and returns the reason, and the send error it saw if any.
func sendEvery(d time.Duration, s watchStream, sendErrs chan<- error) error {
	for seq := uint64(1); ; seq++ {
		if err := s.Send(&sessiongatev1.WatchJobResponse{EventSeq: seq}); err != nil {
			sendErrs <- err
			return err
		}
		if seq == 1 {
			continue // two messages at once, then one every d
		}
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-s.Context().Done():
			t.Stop()
			err := s.Send(&sessiongatev1.WatchJobResponse{EventSeq: seq + 1}) // refused now
			sendErrs <- err
			return s.Context().Err()
		}
	}
}

// recvAll reads the stream to its end and returns the messages and status.
func recvAll(stream grpc.ServerStreamingClient[sessiongatev1.WatchJobResponse]) (int, error) {
	n := 0
	for {
		_, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return n, nil
			}
			return n, err
		}
		n++
	}
}

func TestStreamLimitsOverLoopback(t *testing.T) {
	cases := []struct {
		name       string
		policy     timeoutprofile.StreamingPolicy
		md         []string
		handler    func(*sessiongatev1.WatchJobRequest, watchStream, chan<- error) error
		limit      string
		configured uint32
		minMsgs    int
	}{
		{
			name:   "initial",
			policy: timeoutprofile.StreamingPolicy{Initial: 50 * time.Millisecond, Gap: 10 * time.Second},
			handler: func(_ *sessiongatev1.WatchJobRequest, s watchStream, errs chan<- error) error {
				err := waitForBudget(s.Context())
				errs <- s.Send(&sessiongatev1.WatchJobResponse{})
				return err
			},
			limit: "initial", configured: 50,
		},
		{
			name:   "gap",
			policy: timeoutprofile.StreamingPolicy{Initial: 10 * time.Second, Gap: 300 * time.Millisecond},
			handler: func(_ *sessiongatev1.WatchJobRequest, s watchStream, errs chan<- error) error {
				for i := range 3 {
					if err := s.Send(&sessiongatev1.WatchJobResponse{EventSeq: uint64(i + 1)}); err != nil {
						return err
					}
				}
				err := waitForBudget(s.Context())
				errs <- s.Send(&sessiongatev1.WatchJobResponse{})
				return err
			},
			limit: "gap", configured: 300, minMsgs: 3,
		},
		{
			name:   "total",
			policy: timeoutprofile.StreamingPolicy{Initial: 10 * time.Second, Gap: 10 * time.Second, Total: 400 * time.Millisecond},
			handler: func(_ *sessiongatev1.WatchJobRequest, s watchStream, errs chan<- error) error {
				return sendEvery(10*time.Millisecond, s, errs)
			},
			limit: "total", configured: 400, minMsgs: 2,
		},
		{
			name:   "total from x-timeout-ms",
			policy: timeoutprofile.StreamingPolicy{Initial: 10 * time.Second, Gap: 10 * time.Second},
			md:     []string{"x-timeout-ms", "350"},
			handler: func(_ *sessiongatev1.WatchJobRequest, s watchStream, errs chan<- error) error {
				return sendEvery(10*time.Millisecond, s, errs)
			},
			limit: "total", configured: 350, minMsgs: 2,
		},
		{
			name:   "no policy: the profile bounds the stream",
			policy: timeoutprofile.StreamingPolicy{}, // all zero: no policy
			handler: func(_ *sessiongatev1.WatchJobRequest, s watchStream, errs chan<- error) error {
				return sendEvery(10*time.Millisecond, s, errs)
			},
			limit: "total", configured: 400, minMsgs: 2,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obs := newTestObserver()
			e := mustNew(t, timeoutprofile.WithProfile(streamToolCall), timeoutprofile.WithObserver(obs),
				timeoutprofile.WithStreamingPolicy(watchJob, tc.policy))
			sendErrs := make(chan error, 1)
			causes := make(chan error, 1)
			conn := serve(t, e, &gateway{watchJob: func(r *sessiongatev1.WatchJobRequest, s watchStream) error {
				err := tc.handler(r, s, sendErrs)
				causes <- context.Cause(s.Context())
				return err
			}})
			ctx := noDeadlineCtx(t)
			if tc.md != nil {
				ctx = withMD(testCtx(t), tc.md...)
			}
			stream, err := sessiongatev1.NewSessionGatewayClient(conn).WatchJob(ctx, &sessiongatev1.WatchJobRequest{})
			if err != nil {
				t.Fatal(err)
			}
			n, err := recvAll(stream)
			te := checkTimeout(t, err, "tool_call", "WatchJob", tc.limit, tc.configured)
			if n < tc.minMsgs {
				t.Errorf("received %d messages, want at least %d", n, tc.minMsgs)
			}
			var cause *timeoutprofile.TimeoutError
			if c := <-causes; !errors.As(c, &cause) || cause.Limit != tc.limit || cause.Configured.Milliseconds() != int64(te.GetConfiguredTimeoutMs()) {
				t.Errorf("handler's cause = %v", c)
			}
			if err := <-sendErrs; status.Code(err) != codes.DeadlineExceeded {
				t.Errorf("Send after the limit: %v, want the timeout status", err)
			}
			if obs.timeoutsOf("tool_call") != 1 {
				t.Errorf("timeouts counted: %d", obs.timeoutsOf("tool_call"))
			}
		})
	}
}

func TestStreamWithinLimits(t *testing.T) {
	// A stream that keeps its gap ends normally even though it lasts longer
	// than the profile's 100 ms default, and the caller's deadline is not clamped to the profile
	// (10 s deadline, 1 s profile max).
	e := mustNew(t, timeoutprofile.WithProfile(shortToolCall),
		timeoutprofile.WithStreamingPolicy(watchJob, timeoutprofile.StreamingPolicy{Initial: time.Second, Gap: time.Second}))
	deadlines := make(chan time.Duration, 1)
	conn := serve(t, e, &gateway{watchJob: func(_ *sessiongatev1.WatchJobRequest, s watchStream) error {
		dl, _ := s.Context().Deadline()
		deadlines <- time.Until(dl)
		for i := range 10 {
			tm := time.NewTimer(20 * time.Millisecond)
			select {
			case <-tm.C:
			case <-s.Context().Done():
				tm.Stop()
				return s.Context().Err()
			}
			if err := s.Send(&sessiongatev1.WatchJobResponse{EventSeq: uint64(i + 1)}); err != nil {
				return err
			}
		}
		return nil
	}})
	stream, err := sessiongatev1.NewSessionGatewayClient(conn).WatchJob(testCtx(t), &sessiongatev1.WatchJobRequest{})
	if err != nil {
		t.Fatal(err)
	}
	n, err := recvAll(stream)
	if err != nil || n != 10 {
		t.Errorf("got %d messages, %v", n, err)
	}
	if d := <-deadlines; d < 5*time.Second {
		t.Errorf("stream deadline %v away, want the caller's 10 s", d)
	}
}

func TestStreamInfiniteOverride(t *testing.T) {
	// x-timeout-ms 0 lifts the total but not the policy's gap.
	e := mustNew(t, timeoutprofile.WithProfile(shortToolCall),
		timeoutprofile.WithStreamingPolicy(watchJob, timeoutprofile.StreamingPolicy{Initial: 50 * time.Millisecond, Total: 60 * time.Millisecond}))
	conn := serve(t, e, &gateway{watchJob: func(_ *sessiongatev1.WatchJobRequest, s watchStream) error {
		if _, ok := s.Context().Deadline(); ok {
			return status.Error(codes.Internal, "deadline set")
		}
		return waitForBudget(s.Context())
	}})
	stream, err := sessiongatev1.NewSessionGatewayClient(conn).WatchJob(withMD(noDeadlineCtx(t), "x-timeout-ms", "0"), &sessiongatev1.WatchJobRequest{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = recvAll(stream)
	checkTimeout(t, err, "tool_call", "WatchJob", "initial", 50)
}
