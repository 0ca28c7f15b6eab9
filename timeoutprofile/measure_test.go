package timeoutprofile_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	sessiongatev1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
	timeoutprofilev1 "github.com/sessiongate/sessiongate/gen/timeoutprofile/v1"
	"github.com/sessiongate/sessiongate/timeoutprofile"
)

// TestMeasureDeadlineMargin measures how many callers whose own deadline is
// the effective budget receive the timeout details, for several deadline
// margins, under three loads. It is the measurement DefaultDeadlineMargin
// was chosen from (figures in doc.go). It prints a table and asserts
// nothing about the figures; it is skipped unless TIMEOUTPROFILE_MEASURE is
// set:
//
//	TIMEOUTPROFILE_MEASURE=1 go test -run TestMeasureDeadlineMargin -v -count=1 -timeout 30m ./timeoutprofile/
//
// Knobs: TIMEOUTPROFILE_MEASURE_N, calls per row (default 400);
// TIMEOUTPROFILE_MEASURE_MARGINS, margins in ms (default 0,2,5,10,20,50,100);
// TIMEOUTPROFILE_MEASURE_ROUNDS, repetitions of the table, each row's
// figures summed (default 1); TIMEOUTPROFILE_MEASURE_CLIENT=inproc runs the
// clients in the test process instead of a separate one.
//
// Each row serves RunJob on a fresh loopback TCP port (127.0.0.1, not
// bufconn) behind an Enforcer with that margin; the handler blocks until
// its context ends. N concurrent Go clients call it without x-timeout-ms,
// with deadlines spread evenly from 50 ms to 2 s in random order, so that
// each caller's own deadline is its budget. The clients run in a separate
// process (this test binary again, TestMeasureDeadlineMarginClient), as a
// Python or Node caller would. Loads: "none"; "2 procs", two busy-looping
// sh processes beside; "2 gorout", two spinning goroutines in the server's
// process, competing with it for GOMAXPROCS (a gateway saturated by its own
// work). Outcomes: "details" (the server's DEADLINE_EXCEEDED with
// TimeoutExceeded reached the caller first), "bare" (DEADLINE_EXCEEDED
// without details: the caller's own timer won), "cancel" (CANCELLED: the
// server's RST_STREAM at its deadline won), "other"; "bare<=200ms" counts
// the bare outcomes of calls with deadlines of at most 200 ms.
func TestMeasureDeadlineMargin(t *testing.T) {
	if os.Getenv("TIMEOUTPROFILE_MEASURE") == "" {
		t.Skip("set TIMEOUTPROFILE_MEASURE=1 to run the deadline margin measurement")
	}
	n := envInt(t, "TIMEOUTPROFILE_MEASURE_N", 400)
	rounds := envInt(t, "TIMEOUTPROFILE_MEASURE_ROUNDS", 1)
	inproc := os.Getenv("TIMEOUTPROFILE_MEASURE_CLIENT") == "inproc"
	margins := []time.Duration{0, 2 * time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond}
	if v := os.Getenv("TIMEOUTPROFILE_MEASURE_MARGINS"); v != "" {
		margins = nil
		for _, f := range strings.Split(v, ",") {
			m, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil {
				t.Fatalf("TIMEOUTPROFILE_MEASURE_MARGINS=%q", v)
			}
			margins = append(margins, time.Duration(m)*time.Millisecond)
		}
	}
	loads := []string{"none", "2 procs", "2 gorout"}
	load, _ := os.ReadFile("/proc/loadavg")
	t.Logf("GOMAXPROCS=%d NumCPU=%d N=%d x %d rounds, deadlines 50ms-2s, clients in process: %v; loadavg at start: %s",
		runtime.GOMAXPROCS(0), runtime.NumCPU(), n, rounds, inproc, strings.TrimSpace(string(load)))
	sums := map[string]*marginOutcomes{}
	for range rounds {
		for _, hogs := range loads {
			for _, margin := range margins {
				o := measureMargin(t, margin, hogs, n, inproc)
				key := fmt.Sprint(hogs, margin)
				if sums[key] == nil {
					sums[key] = &marginOutcomes{}
				}
				sums[key].add(o)
			}
		}
	}
	t.Logf("%-9s %-7s %8s %8s %8s %8s %9s %12s %9s %9s", "load", "margin", "details", "bare", "cancel", "other", "details%", "bare<=200ms", "need p50", "need p99")
	for _, hogs := range loads {
		var pooled []time.Duration
		for _, margin := range margins {
			o := sums[fmt.Sprint(hogs, margin)]
			need := o.needed(margin)
			if margin >= 50*time.Millisecond {
				pooled = append(pooled, need...)
			}
			t.Logf("%-9s %-7v %8d %8d %8d %8d %8.1f%% %12d %9s %9s", hogs, margin, o.details, o.bare, o.cancelled, o.other,
				100*float64(o.details)/float64(n*rounds), o.missedShort, percentile(need, 0.5), percentile(need, 0.99))
		}
		slices.Sort(pooled)
		t.Logf("%-9s needed margin (ms), rows with margins >= 50ms, %d calls with deadlines >= margin+50ms: p50 %s, p90 %s, p99 %s, p99.9 %s",
			hogs, len(pooled), percentile(pooled, 0.5), percentile(pooled, 0.9), percentile(pooled, 0.99), percentile(pooled, 0.999))
	}
	load, _ = os.ReadFile("/proc/loadavg")
	t.Logf("loadavg at end: %s", strings.TrimSpace(string(load)))
}

// TestMeasureDeadlineMarginClient is the client process of
// TestMeasureDeadlineMargin: it calls the server at
// TIMEOUTPROFILE_MEASURE_CLIENT_ADDR and prints its outcomes on stdout.
func TestMeasureDeadlineMarginClient(t *testing.T) {
	addr := os.Getenv("TIMEOUTPROFILE_MEASURE_CLIENT_ADDR")
	if addr == "" {
		t.Skip("run by TestMeasureDeadlineMargin")
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	o := runMarginCalls(t, conn, envInt(t, "TIMEOUTPROFILE_MEASURE_N", 400))
	fmt.Printf("OUTCOMES %d %d %d %d %d\n", o.details, o.bare, o.cancelled, o.other, o.missedShort)
	var b strings.Builder
	b.WriteString("CALLS_US")
	for _, c := range o.calls {
		fmt.Fprintf(&b, " %d:%d:%v", c.deadline.Microseconds(), c.slack.Microseconds(), c.details)
	}
	fmt.Println(b.String())
}

func envInt(t *testing.T, key string, def int) int {
	v := os.Getenv(key)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive integer", key, v)
	}
	return n
}

type marginOutcomes struct {
	details, bare, cancelled, other, missedShort int
	calls                                        []callOutcome
}

// callOutcome is one call: its deadline, whether it received the details,
// and if so how long before its own deadline (slack).
type callOutcome struct {
	deadline, slack time.Duration
	details         bool
}

func (o *marginOutcomes) add(p marginOutcomes) {
	o.details += p.details
	o.bare += p.bare
	o.cancelled += p.cancelled
	o.other += p.other
	o.missedShort += p.missedShort
	o.calls = append(o.calls, p.calls...)
}

// needed returns, for calls made with margin m, the margin each call
// needed to receive the details (m less its slack), sorted, with calls that
// did not receive them counted as needing more than any. Calls with
// deadlines under m+50ms are left out: the server may have ended them at
// once, so their slack says nothing about the margin.
func (o *marginOutcomes) needed(m time.Duration) []time.Duration {
	var out []time.Duration
	for _, c := range o.calls {
		switch {
		case c.deadline < m+50*time.Millisecond:
		case c.details:
			out = append(out, m-c.slack)
		default:
			out = append(out, time.Duration(math.MaxInt64))
		}
	}
	slices.Sort(out)
	return out
}

// percentile formats the q-quantile of sorted needed margins in ms.
func percentile(sorted []time.Duration, q float64) string {
	if len(sorted) == 0 {
		return "-"
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	if i < 0 {
		i = 0
	}
	if sorted[i] == time.Duration(math.MaxInt64) {
		return "miss"
	}
	return strconv.FormatFloat(float64(sorted[i])/float64(time.Millisecond), 'f', 1, 64)
}

// measureMargin runs one row of TestMeasureDeadlineMargin.
func measureMargin(t *testing.T, margin time.Duration, hogs string, n int, inproc bool) marginOutcomes {
	t.Helper()
	// A profile that never shortens a 50 ms–2 s deadline nor raises it.
	p := timeoutprofile.Profile{Name: "tool_call", Default: time.Minute, Min: time.Millisecond, Max: time.Hour}
	e := mustNew(t, timeoutprofile.WithProfile(p), timeoutprofile.WithDeadlineMargin(margin))
	conn := serve(t, e, &gateway{runJob: func(ctx context.Context, _ *sessiongatev1.RunJobRequest) (*sessiongatev1.RunJobResponse, error) {
		return nil, waitForBudget(ctx)
	}})

	switch hogs {
	case "2 gorout":
		var stop atomic.Bool
		var hogsDone sync.WaitGroup
		for range 2 {
			hogsDone.Go(func() {
				for x := 0; !stop.Load(); x++ {
					_ = x * x
				}
			})
		}
		defer func() { stop.Store(true); hogsDone.Wait() }()
	case "2 procs":
		for range 2 {
			cmd := exec.Command("sh", "-c", "while :; do :; done")
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
		}
	}

	if inproc {
		return runMarginCalls(t, conn, n)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestMeasureDeadlineMarginClient$", "-test.count=1")
	cmd.Env = append(os.Environ(), "TIMEOUTPROFILE_MEASURE_CLIENT_ADDR="+conn.Target(), "TIMEOUTPROFILE_MEASURE_N="+strconv.Itoa(n))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("client process: %v\n%s", err, out)
	}
	var o marginOutcomes
	found := false
	for _, line := range strings.Split(string(out), "\n") {
		switch {
		case strings.HasPrefix(line, "OUTCOMES "):
			if _, err := fmt.Sscan(line[len("OUTCOMES "):], &o.details, &o.bare, &o.cancelled, &o.other, &o.missedShort); err != nil {
				t.Fatalf("client process output %q: %v", line, err)
			}
			found = true
		case strings.HasPrefix(line, "CALLS_US"):
			for _, f := range strings.Fields(line)[1:] {
				var dl, slack int64
				var c callOutcome
				if _, err := fmt.Sscanf(strings.ReplaceAll(f, ":", " "), "%d %d %t", &dl, &slack, &c.details); err != nil {
					t.Fatalf("client process output %q: %v", f, err)
				}
				c.deadline, c.slack = time.Duration(dl)*time.Microsecond, time.Duration(slack)*time.Microsecond
				o.calls = append(o.calls, c)
			}
		}
	}
	if !found {
		t.Fatalf("client process printed no outcomes:\n%s", out)
	}
	return o
}

// runMarginCalls makes n concurrent RunJob calls on conn with deadlines
// spread evenly from 50 ms to 2 s, in random order, and counts outcomes.
func runMarginCalls(t *testing.T, conn *grpc.ClientConn, n int) marginOutcomes {
	// Connect first, so the first calls do not pay for the handshake.
	if _, err := timeoutprofilev1.NewTimeoutProfileServiceClient(conn).ListProfiles(testCtx(t), &timeoutprofilev1.ListProfilesRequest{}); err != nil {
		t.Fatalf("warm-up call: %v", err)
	}
	client := sessiongatev1.NewSessionGatewayClient(conn)
	deadlines := make([]time.Duration, n)
	for i := range deadlines {
		step := time.Duration(0)
		if n > 1 {
			step = (1950 * time.Millisecond) * time.Duration(i) / time.Duration(n-1)
		}
		deadlines[i] = 50*time.Millisecond + step
	}
	rand.Shuffle(n, func(i, j int) { deadlines[i], deadlines[j] = deadlines[j], deadlines[i] })

	var mu sync.Mutex
	var o marginOutcomes
	var calls sync.WaitGroup
	for _, d := range deadlines {
		calls.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), d)
			defer cancel()
			dl, _ := ctx.Deadline()
			_, err := client.RunJob(ctx, &sessiongatev1.RunJobRequest{})
			slack := time.Until(dl)
			mu.Lock()
			defer mu.Unlock()
			_, details := timeoutprofile.FromError(err)
			o.calls = append(o.calls, callOutcome{deadline: d, slack: slack, details: details})
			switch code := status.Code(err); {
			case code == codes.DeadlineExceeded && details:
				o.details++
			case code == codes.DeadlineExceeded:
				o.bare++
				if d <= 200*time.Millisecond {
					o.missedShort++
				}
			case code == codes.Canceled:
				o.cancelled++
			default:
				o.other++
				t.Logf("unexpected outcome: %v", err)
			}
		})
	}
	calls.Wait()
	return o
}
