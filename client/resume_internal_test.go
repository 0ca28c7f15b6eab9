package client

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
)

func cutErr(code codes.Code, reason string) error {
	return &Error{Code: code, Message: "x", Reason: reason}
}

func TestResumable(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{cutErr(codes.Unavailable, ""), true}, // a dropped connection
		{cutErr(codes.Unavailable, "SESSION_HANDED_OFF"), true},
		{cutErr(codes.Unavailable, "OWNER_UNREACHABLE"), true},
		{cutErr(codes.Unavailable, "NOT_OWNER"), true},
		{cutErr(codes.Unavailable, "DIRECTORY_UNAVAILABLE"), true},
		{cutErr(codes.Unavailable, "DRAINING"), true},
		{cutErr(codes.Unavailable, "REPLICA_SILENT"), true},
		{&Error{Code: codes.Internal, Message: "stream terminated by RST_STREAM with error code: INTERNAL_ERROR"}, true},
		{&Error{Code: codes.Internal, Message: "Received RST_STREAM with error code 2"}, true},
		{&Error{Code: codes.Internal, Message: "Received RST_STREAM with code 2 (Internal server error)"}, true},
		{&Error{Code: codes.Internal, Message: "stream terminated by RST_STREAM with error code: CANCEL"}, false},
		{&Error{Code: codes.Internal, Message: "Received RST_STREAM with code 20"}, false},
		{&Error{Code: codes.Internal, Message: "stream terminated by RST_STREAM with error code: INTERNAL_ERROR", Reason: "INTERNAL"}, false}, // the gateway's own
		{&Error{Code: codes.Unknown, Message: "stream terminated by RST_STREAM with error code: INTERNAL_ERROR"}, false},
		{cutErr(codes.Internal, ""), false},
		{cutErr(codes.Unavailable, "SESSION_LOST"), false},
		{cutErr(codes.Unavailable, "SESSION_CLOSED"), false},
		{cutErr(codes.NotFound, "JOB_NOT_FOUND"), false},
		{cutErr(codes.Canceled, ""), false},
		{cutErr(codes.DeadlineExceeded, ""), false},
		{&TimeoutError{Err: &Error{Code: codes.DeadlineExceeded}}, false},
	} {
		if got := Resumable(c.err); got != c.want {
			t.Errorf("Resumable(%v) = %v", c.err, got)
		}
	}
	if _, ok := newResumer(0, nil, time.Time{}, rand.Float64).cut(cutErr(codes.Unavailable, ""), time.Now()); ok {
		t.Error("resumed with resuming off")
	}
}

func TestResumerBackoff(t *testing.T) {
	one := func() float64 { return 1 }
	r := newResumer(0, &ResumePolicy{MaxAttempts: 4, InitialBackoff: 100 * time.Millisecond, MaxBackoff: 300 * time.Millisecond}, time.Time{}, one)
	now := time.Unix(0, 0)
	var got []time.Duration
	for range 5 {
		d, ok := r.cut(cutErr(codes.Unavailable, ""), now)
		if !ok {
			d = -1
		}
		got = append(got, d)
	}
	want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond, 300 * time.Millisecond, -1}
	if !slicesEqual(got, want) {
		t.Errorf("backoffs %v, want %v", got, want)
	}
	if !r.deliver(1, false) {
		t.Fatal("item refused")
	}
	if d, ok := r.cut(cutErr(codes.Unavailable, ""), now); !ok || d != 100*time.Millisecond {
		t.Errorf("after an item: %v, %v (want the backoff reset)", d, ok)
	}
	dl := newResumer(0, &ResumePolicy{InitialBackoff: time.Second, MaxBackoff: time.Second}, now.Add(10*time.Second), one)
	if _, ok := dl.cut(cutErr(codes.Unavailable, ""), now); !ok {
		t.Error("no resume well before the deadline")
	}
	if _, ok := dl.cut(cutErr(codes.Unavailable, ""), now.Add(9500*time.Millisecond)); ok {
		t.Error("a backoff past the deadline")
	}
}

func slicesEqual(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestResumerProperties runs random schedules of items (fresh, duplicate,
// terminal) and cuts (resumable or not) and checks after every step: what
// the caller saw is strictly increasing and above the start, nothing
// follows the terminal item, a non-resumable cut is never resumed, resumes
// in a row stay within MaxAttempts, and no backoff ends past the deadline.
// SESSIONGATE_SEED=<n> replays one schedule.
func TestResumerProperties(t *testing.T) {
	seeds := make([]uint64, 0, 500)
	if s := os.Getenv("SESSIONGATE_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		seeds = append(seeds, n)
	} else {
		for i := range uint64(500) {
			seeds = append(seeds, i)
		}
	}
	for _, seed := range seeds {
		if msg := resumerSchedule(seed); msg != "" {
			t.Fatalf("seed %d (replay: SESSIONGATE_SEED=%d): %s", seed, seed, msg)
		}
	}
}

func resumerSchedule(seed uint64) string {
	rng := rand.New(rand.NewPCG(seed, 0x5e55))
	policy := &ResumePolicy{MaxAttempts: 1 + rng.IntN(5), InitialBackoff: 10 * time.Millisecond, MaxBackoff: 500 * time.Millisecond}
	now := time.Unix(1000, 0)
	var deadline time.Time
	if rng.IntN(2) == 0 {
		deadline = now.Add(time.Duration(500+rng.IntN(4500)) * time.Millisecond)
	}
	start := uint64(rng.IntN(6))
	r := newResumer(start, policy, deadline, rng.Float64)
	var seen []uint64
	server := start
	inARow := 0
steps:
	for n := 1 + rng.IntN(60); n > 0; n-- {
		switch step := rng.Float64(); {
		case step < 0.55:
			seq := server + 1 + uint64(rng.IntN(3))
			if r.deliver(seq, rng.Float64() < 0.05) {
				seen = append(seen, seq)
				inARow = 0
			}
			server = seq
		case step < 0.7:
			if r.deliver(uint64(rng.IntN(int(r.cursor)+1)), false) {
				return "a duplicate was delivered"
			}
		default:
			ok := rng.Float64() < 0.7
			reason := "SESSION_LOST"
			if ok {
				reason = []string{"", "SESSION_HANDED_OFF"}[rng.IntN(2)]
			}
			wasDone := r.done
			d, resumed := r.cut(cutErr(codes.Unavailable, reason), now)
			if !resumed {
				break steps
			}
			switch {
			case !ok:
				return "a non-resumable cut was resumed"
			case wasDone:
				return "resumed after the terminal item"
			case inARow+1 > policy.MaxAttempts:
				return "more resumes in a row than MaxAttempts"
			case d > policy.MaxBackoff:
				return "a backoff above MaxBackoff"
			case !deadline.IsZero() && !now.Add(d).Before(deadline):
				return "a backoff past the deadline"
			}
			inARow++
			now = now.Add(d)
			server = r.cursor
		}
		for i := range seen {
			if seen[i] <= start || (i > 0 && seen[i] <= seen[i-1]) {
				return fmt.Sprintf("not strictly increasing above the start %d: %v", start, seen)
			}
		}
		if r.done && r.deliver(server+1, false) {
			return "an item after the terminal one"
		}
	}
	return ""
}
