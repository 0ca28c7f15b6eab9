package tpprom_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/sessiongate/sessiongate/timeoutprofile"
	"github.com/sessiongate/sessiongate/timeoutprofile/tpprom"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestObserverMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	obs, err := tpprom.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	tp, err := timeoutprofile.New(timeoutprofile.WithObserver(obs),
		timeoutprofile.WithProfile(timeoutprofile.Profile{Name: "tool_call", Default: 20 * time.Millisecond, Min: 10 * time.Millisecond, Max: time.Second, AllowInfinite: true}))
	if err != nil {
		t.Fatal(err)
	}
	unary := tp.UnaryServerInterceptor()
	call := func(md metadata.MD, wait bool) {
		// No deadline, so the profile's 20 ms applies and bounds the wait.
		ctx := metadata.NewIncomingContext(context.Background(), md)
		_, _ = unary(ctx, nil, &grpc.UnaryServerInfo{FullMethod: "/sw4rm.tool.v1.ToolService/Call"}, func(ctx context.Context, _ any) (any, error) {
			if wait {
				<-ctx.Done()
			}
			return nil, nil
		})
	}
	call(metadata.MD{}, true)                               // times out after 20 ms
	call(metadata.Pairs("x-timeout-ms", "1"), false)        // below_min
	call(metadata.Pairs("x-timeout-ms", "1"), false)        // below_min
	call(metadata.Pairs("x-timeout-ms", "99999999"), false) // above_max

	got := gather(t, reg)
	labels := `{method="Call",profile="tool_call",service="sw4rm.tool.v1.ToolService"}`
	clamped := func(rule string) string {
		return `sw4rm_rpc_timeout_clamped_total{method="Call",profile="tool_call",rule="` + rule + `",service="sw4rm.tool.v1.ToolService"}`
	}
	want := map[string]float64{
		"sw4rm_rpc_timeout_total" + labels:     1,
		clamped("above_max"):                   1,
		clamped("below_min"):                   2,
		clamped("kept_caller_deadline"):        0,
		clamped("zero_not_infinite"):           0,
		"sw4rm_rpc_duration_ms_count" + labels: 4,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	if len(got) != len(want)+1 {
		t.Errorf("series: %v", got)
	}
	if sum := got["sw4rm_rpc_duration_ms_sum"+labels]; sum < 20 {
		t.Errorf("duration sum %v ms, want at least the 20 ms timeout", sum)
	}
}

// gather returns every series of reg as name{labels} → value (histograms
// as _count and _sum).
func gather(t *testing.T, reg prometheus.Gatherer) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			key := "{" + strings.Join(ls, ",") + "}"
			switch {
			case m.GetCounter() != nil:
				out[mf.GetName()+key] = m.GetCounter().GetValue()
			case m.GetHistogram() != nil:
				out[mf.GetName()+"_count"+key] = float64(m.GetHistogram().GetSampleCount())
				out[mf.GetName()+"_sum"+key] = m.GetHistogram().GetSampleSum()
			}
		}
	}
	return out
}

func TestDuplicateRegistration(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := tpprom.New(reg); err != nil {
		t.Fatal(err)
	}
	var already prometheus.AlreadyRegisteredError
	if _, err := tpprom.New(reg); !errors.As(err, &already) {
		t.Errorf("second New: %v", err)
	}
	// A failed New leaves nothing behind.
	reg2 := prometheus.NewRegistry()
	reg2.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "sw4rm_rpc_timeout_clamped_total", Help: "x"}))
	if _, err := tpprom.New(reg2); err == nil {
		t.Fatal("no error")
	}
	if n := len(gather(t, reg2)); n != 1 {
		t.Errorf("%d series left after a failed New", n)
	}
	if _, err := tpprom.New(nil); err == nil {
		t.Error("nil Registerer accepted")
	}
	if _, err := tpprom.New(prometheus.NewRegistry(), tpprom.WithBuckets([]float64{2, 1})); err == nil {
		t.Error("decreasing buckets accepted")
	}
}

func TestObserveDoesNotAllocate(t *testing.T) {
	obs, err := tpprom.New(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	m := obs.ForMethod("tool_call", "a.B", "C")
	if n := testing.AllocsPerRun(100, func() {
		m.Duration(3 * time.Millisecond)
		m.Timeout()
		m.Clamped(timeoutprofile.RuleBelowMin)
	}); n != 0 {
		t.Errorf("%v allocations per observation", n)
	}
}
