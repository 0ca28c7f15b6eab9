package timeoutprofile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestWithMargin: the rule that picks the caller's deadline less the margin
// as a call's budget, and the margin that scales with the time left: a
// third of it, at most the ceiling, so that a call with any time left runs.
func TestWithMargin(t *testing.T) {
	p := &Profile{Name: "p", Default: 5 * time.Second, Min: time.Second, Max: 30 * time.Second, AllowInfinite: true}
	now := time.Unix(1000, 0)
	const none = time.Duration(-1)
	const ceiling = 100 * time.Millisecond
	cases := []struct {
		name     string
		callerDL time.Duration // none: no deadline
		override time.Duration // none: no x-timeout-ms
		ceiling  time.Duration
		// want
		callerBound bool
		margin      time.Duration
	}{
		{"no deadline: the profile's", none, none, ceiling, false, 0},
		{"deadline only: deadline less the ceiling", 10 * time.Second, none, ceiling, true, ceiling},
		{"deadline above max: the profile's", time.Minute, none, ceiling, false, 0},
		{"override well inside the deadline: the profile's", 10 * time.Second, 2 * time.Second, ceiling, false, 0},
		{"override within the margin of the deadline", 2 * time.Second, 1950 * time.Millisecond, ceiling, true, ceiling},
		{"override equal to the deadline", 2 * time.Second, 2 * time.Second, ceiling, true, ceiling},
		{"override past the deadline", 2 * time.Second, 20 * time.Second, ceiling, true, ceiling},
		{"infinite override bounded by the deadline", 3 * time.Second, 0, ceiling, true, ceiling},
		{"below min: kept, less the ceiling", 500 * time.Millisecond, none, ceiling, true, ceiling},
		{"300 ms left: a third is the ceiling", 300 * time.Millisecond, none, ceiling, true, ceiling},
		{"150 ms left: a third", 150 * time.Millisecond, none, ceiling, true, 50 * time.Millisecond},
		{"100 ms left: a third", 100 * time.Millisecond, none, ceiling, true, 100 * time.Millisecond / 3},
		{"20 ms left: a third, the call runs", 20 * time.Millisecond, none, ceiling, true, 20 * time.Millisecond / 3},
		{"1 ms left: the call runs", time.Millisecond, none, ceiling, true, time.Millisecond / 3},
		{"1 ns left: the call runs", time.Nanosecond, none, ceiling, true, 0},
		{"small ceiling wins", 150 * time.Millisecond, none, 10 * time.Millisecond, true, 10 * time.Millisecond},
		{"expired: refused", -time.Second, none, ceiling, true, 0},
		{"at the deadline: refused", 0, none, ceiling, true, 0},
		{"ceiling 0: unchanged", 10 * time.Second, none, 0, false, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var dl time.Time
			hasDL := tc.callerDL != none
			if hasDL {
				dl = now.Add(tc.callerDL)
			}
			before := computeBudget(p, now, dl, hasDL, tc.override, tc.override != none)
			b := before.withMargin(now, dl, hasDL, tc.ceiling, 0)
			if b.callerBound != tc.callerBound {
				t.Fatalf("callerBound=%v; want %v", b.callerBound, tc.callerBound)
			}
			if b.rule != before.rule {
				t.Errorf("rule changed from %v to %v", before.rule, b.rule)
			}
			if !b.callerBound {
				if b != before {
					t.Errorf("budget changed: %+v → %+v", before, b)
				}
				return
			}
			if want := tc.callerDL - tc.margin; b.timeout != want {
				t.Errorf("timeout %v; want %v (the %v left less a %v margin)", b.timeout, want, tc.callerDL, tc.margin)
			}
			if !b.own || b.infinite || !b.deadline.Equal(dl.Add(-tc.margin)) {
				t.Errorf("own=%v infinite=%v deadline=%v; want own, finite, the caller's less the margin", b.own, b.infinite, b.deadline)
			}
			// Only a call with no time left is refused (tooLate).
			if refused := b.timeout <= 0; refused != (tc.callerDL <= 0) {
				t.Errorf("refused=%v with %v left; want refused exactly when no time is left", refused, tc.callerDL)
			}
		})
	}
}

// TestDeadlineMarginSettings: default < file < environment < option.
func TestDeadlineMarginSettings(t *testing.T) {
	file := filepath.Join(t.TempDir(), "p.json")
	if err := os.WriteFile(file, []byte(`{"deadline_margin_ms": 7}`), 0o600); err != nil {
		t.Fatal(err)
	}
	env := func(vars map[string]string) func(string) string {
		return func(k string) string { return vars[k] }
	}
	margin := func(env func(string) string, opts ...Option) time.Duration {
		t.Helper()
		cfg, err := LoadGlobal(env)
		if err != nil {
			t.Fatal(err)
		}
		e, err := New(append([]Option{WithConfig(cfg)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		return e.margin
	}
	if e, _ := New(); e.margin != DefaultDeadlineMargin {
		t.Errorf("no configuration: %v, want %v", e.margin, DefaultDeadlineMargin)
	}
	for _, tc := range []struct {
		name string
		vars map[string]string
		opts []Option
		want time.Duration
	}{
		{"default", nil, nil, DefaultDeadlineMargin},
		{"file", map[string]string{envFile: file}, nil, 7 * time.Millisecond},
		{"environment over file", map[string]string{envFile: file, envMargin: "11"}, nil, 11 * time.Millisecond},
		{"environment 0 turns it off", map[string]string{envMargin: "0"}, nil, 0},
		{"option over environment", map[string]string{envFile: file, envMargin: "11"}, []Option{WithDeadlineMargin(3 * time.Millisecond)}, 3 * time.Millisecond},
		{"option 0 turns it off", nil, []Option{WithDeadlineMargin(0)}, 0},
	} {
		if got := margin(env(tc.vars), tc.opts...); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}

	for _, tc := range []struct{ doc, want string }{
		{`{"deadline_margin_ms": 1001}`, "deadline_margin_ms: want 0 to 1000 ms"},
		{`{"deadline_margin_ms": -1}`, "deadline_margin_ms: must be a non-negative integer"},
		{`{"deadline_margin_ms": 1.5}`, "deadline_margin_ms: must be a non-negative integer"},
		{`{"Deadline_Margin_MS": 5}`, `unknown field "Deadline_Margin_MS"`},
	} {
		if _, err := ParseConfig([]byte(tc.doc)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.doc, err, tc.want)
		}
	}
	for _, v := range []string{"-1", "abc", "5ms", "1001"} {
		if _, err := LoadGlobal(env(map[string]string{envMargin: v})); err == nil || !strings.Contains(err.Error(), envMargin) {
			t.Errorf("%s=%q: %v", envMargin, v, err)
		}
	}
	for _, d := range []time.Duration{-time.Millisecond, MaxDeadlineMargin + time.Millisecond} {
		if _, err := New(WithDeadlineMargin(d)); err == nil || !strings.Contains(err.Error(), "WithDeadlineMargin: want 0 to 1000 ms") {
			t.Errorf("WithDeadlineMargin(%v): %v", d, err)
		}
	}
}

// TestStallFloor: with WithStallMargin, a call's margin is at least the
// floor the last lateness set (1.5 × it), at most half the time left, and
// the floor is forgotten after stallMemory; without a lateness it is the
// scaled margin.
func TestStallFloor(t *testing.T) {
	p := &Profile{Name: "p", Default: 5 * time.Second, Min: time.Millisecond, Max: 30 * time.Second}
	now := time.Unix(1000, 0)
	var g stallGauge
	margin := func(left time.Duration, at time.Time) time.Duration {
		dl := at.Add(left)
		b := computeBudget(p, at, dl, true, 0, false).withMargin(at, dl, true, 100*time.Millisecond, g.floor(at))
		return dl.Sub(b.deadline)
	}
	if got := margin(150*time.Millisecond, now); got != 50*time.Millisecond {
		t.Fatalf("150 ms, no lateness: margin %v; want 50ms", got)
	}
	g.note(now, 60*time.Millisecond)
	g.note(now.Add(time.Second), 10*time.Millisecond) // shorter: the 60 ms stays
	cases := []struct {
		left, want time.Duration
		at         time.Time
	}{
		{150 * time.Millisecond, 75 * time.Millisecond, now.Add(2 * time.Second)},     // 90 ms, at most half
		{1 * time.Second, 100 * time.Millisecond, now.Add(2 * time.Second)},           // 90 ms < the ceiling
		{20 * time.Millisecond, 10 * time.Millisecond, now.Add(2 * time.Second)},      // half
		{1 * time.Second, 100 * time.Millisecond, now.Add(stallMemory + time.Second)}, // forgotten
	}
	for _, c := range cases {
		if got := margin(c.left, c.at); got != c.want {
			t.Errorf("%v left at +%v: margin %v; want %v", c.left, c.at.Sub(now), got, c.want)
		}
	}
	g.note(now.Add(3*time.Second), 400*time.Millisecond)
	if got := margin(time.Second, now.Add(4*time.Second)); got != 500*time.Millisecond {
		t.Errorf("1 s left after a 400 ms lateness: margin %v; want 500ms (half)", got)
	}
	if got := margin(3*time.Second, now.Add(4*time.Second)); got != 600*time.Millisecond {
		t.Errorf("3 s left after a 400 ms lateness: margin %v; want 600ms", got)
	}
}
