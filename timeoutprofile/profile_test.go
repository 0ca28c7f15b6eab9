package timeoutprofile

import (
	"testing"
	"time"
)

func TestStandardProfiles(t *testing.T) {
	// SW4-002 §1.2, in milliseconds, plus the fallback.
	want := map[string][4]int64{ // default, min, max, allow_infinite (0/1)
		"heartbeat":            {5000, 1000, 30000, 0},
		"registration":         {30000, 5000, 120000, 0},
		"task_submit":          {30000, 5000, 300000, 0},
		"message_route":        {10000, 1000, 60000, 0},
		"negotiation_open":     {60000, 10000, 600000, 0},
		"negotiation_vote":     {300000, 30000, 1800000, 1},
		"negotiation_decision": {60000, 5000, 300000, 0},
		"handoff":              {60000, 10000, 300000, 0},
		"workflow_submit":      {30000, 5000, 120000, 0},
		"workflow_status":      {10000, 1000, 60000, 0},
		"tool_call":            {30000, 1000, 3600000, 1},
		"hitl_escalate":        {300000, 60000, 3600000, 1},
		"default":              {30000, 1000, 300000, 0},
	}
	got := StandardProfiles()
	if len(got) != len(want) {
		t.Fatalf("got %d profiles, want %d", len(got), len(want))
	}
	for i, p := range got {
		if i > 0 && got[i-1].Name >= p.Name {
			t.Errorf("not sorted: %q before %q", got[i-1].Name, p.Name)
		}
		w, ok := want[p.Name]
		if !ok {
			t.Errorf("unexpected profile %q", p.Name)
			continue
		}
		inf := int64(0)
		if p.AllowInfinite {
			inf = 1
		}
		g := [4]int64{p.Default.Milliseconds(), p.Min.Milliseconds(), p.Max.Milliseconds(), inf}
		if g != w {
			t.Errorf("%s = %v, want %v", p.Name, g, w)
		}
		if err := checkProfile(p, p.Name); err != nil {
			t.Errorf("standard profile invalid: %v", err)
		}
	}
	// The copy is the caller's.
	got[0].Default = 0
	if StandardProfiles()[0].Default == 0 {
		t.Error("StandardProfiles returned shared storage")
	}
}

func TestClamp(t *testing.T) {
	finite := Profile{Name: "p", Default: 5 * time.Second, Min: time.Second, Max: 30 * time.Second}
	infinite := finite
	infinite.AllowInfinite = true
	cases := []struct {
		name string
		p    Profile
		req  time.Duration
		want time.Duration
		rule Rule
	}{
		{"below min", finite, 500 * time.Millisecond, time.Second, RuleBelowMin},
		{"1ms below min", finite, 999 * time.Millisecond, time.Second, RuleBelowMin},
		{"negative", finite, -time.Second, time.Second, RuleBelowMin},
		{"at min", finite, time.Second, time.Second, RuleNone},
		{"inside", finite, 7 * time.Second, 7 * time.Second, RuleNone},
		{"at max", finite, 30 * time.Second, 30 * time.Second, RuleNone},
		{"above max", finite, 31 * time.Second, 30 * time.Second, RuleAboveMax},
		{"far above max", finite, 24 * time.Hour, 30 * time.Second, RuleAboveMax},
		{"zero not infinite", finite, 0, 5 * time.Second, RuleZeroNotInfinite},
		{"zero infinite", infinite, 0, 0, RuleNone},
		{"infinite profile below min", infinite, time.Millisecond, time.Second, RuleBelowMin},
		{"infinite profile above max", infinite, time.Hour, 30 * time.Second, RuleAboveMax},
		{"infinite profile inside", infinite, 2 * time.Second, 2 * time.Second, RuleNone},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, rule := tc.p.Clamp(tc.req)
			if got != tc.want || rule != tc.rule {
				t.Errorf("Clamp(%v) = %v, %v; want %v, %v", tc.req, got, rule, tc.want, tc.rule)
			}
		})
	}
}

func TestRuleString(t *testing.T) {
	for r, want := range map[Rule]string{
		RuleNone: "none", RuleBelowMin: "below_min", RuleAboveMax: "above_max",
		RuleZeroNotInfinite: "zero_not_infinite", RuleKeptCallerDeadline: "kept_caller_deadline", Rule(42): "rule(42)",
	} {
		if got := r.String(); got != want {
			t.Errorf("Rule(%d).String() = %q, want %q", r, got, want)
		}
	}
}

func TestComputeBudget(t *testing.T) {
	p := &Profile{Name: "p", Default: 5 * time.Second, Min: time.Second, Max: 30 * time.Second}
	pi := &Profile{Name: "pi", Default: 5 * time.Second, Min: time.Second, Max: 30 * time.Second, AllowInfinite: true}
	now := time.Unix(1000, 0)
	at := func(d time.Duration) time.Time { return now.Add(d) }
	const none = time.Duration(-1)
	cases := []struct {
		name     string
		p        *Profile
		callerDL time.Duration // none: no deadline
		override time.Duration // none: no x-timeout-ms
		// want
		own      bool
		infinite bool
		timeout  time.Duration
		rule     Rule
	}{
		{"nothing: default", p, none, none, true, false, 5 * time.Second, RuleNone},
		{"deadline inside bounds: caller governs", p, 10 * time.Second, none, false, false, 10 * time.Second, RuleNone},
		{"deadline above max: shortened", p, time.Minute, none, true, false, 30 * time.Second, RuleAboveMax},
		{"deadline below min: kept", p, 200 * time.Millisecond, none, false, false, 200 * time.Millisecond, RuleKeptCallerDeadline},
		{"deadline expired", p, -time.Second, none, false, false, 0, RuleNone},
		{"override inside, no deadline", p, none, 2 * time.Second, true, false, 2 * time.Second, RuleNone},
		{"override below min, no deadline", p, none, 100 * time.Millisecond, true, false, time.Second, RuleBelowMin},
		{"override above max, no deadline", p, none, time.Hour, true, false, 30 * time.Second, RuleAboveMax},
		{"override zero, not infinite", p, none, 0, true, false, 5 * time.Second, RuleZeroNotInfinite},
		{"override zero, infinite", pi, none, 0, false, true, 0, RuleNone},
		{"override zero, infinite, caller deadline bounds", pi, 3 * time.Second, 0, false, true, 3 * time.Second, RuleNone},
		{"override shorter than deadline", p, 10 * time.Second, 2 * time.Second, true, false, 2 * time.Second, RuleNone},
		{"override longer than deadline: deadline bounds", p, 3 * time.Second, 20 * time.Second, false, false, 3 * time.Second, RuleNone},
		{"override below min past deadline: kept", p, 500 * time.Millisecond, 100 * time.Millisecond, false, false, 500 * time.Millisecond, RuleKeptCallerDeadline},
		{"override below min before deadline", p, 10 * time.Second, 100 * time.Millisecond, true, false, time.Second, RuleBelowMin},
		{"override zero past deadline: kept", p, 2 * time.Second, 0, false, false, 2 * time.Second, RuleKeptCallerDeadline},
		{"override above max, deadline later", p, time.Hour, 2 * time.Hour, true, false, 30 * time.Second, RuleAboveMax},
		{"override above max, deadline earlier", p, 10 * time.Second, 2 * time.Hour, false, false, 10 * time.Second, RuleAboveMax},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var dl time.Time
			hasDL := tc.callerDL != none
			if hasDL {
				dl = at(tc.callerDL)
			}
			b := computeBudget(tc.p, now, dl, hasDL, tc.override, tc.override != none)
			if b.own != tc.own || b.infinite != tc.infinite || b.timeout != tc.timeout || b.rule != tc.rule {
				t.Errorf("got own=%v infinite=%v timeout=%v rule=%v; want own=%v infinite=%v timeout=%v rule=%v",
					b.own, b.infinite, b.timeout, b.rule, tc.own, tc.infinite, tc.timeout, tc.rule)
			}
			if b.own && !b.deadline.Equal(now.Add(b.timeout)) {
				t.Errorf("deadline %v, want now+%v", b.deadline, b.timeout)
			}
			if hasDL && b.own && !b.deadline.Before(dl) {
				t.Errorf("own deadline %v not before the caller's %v", b.deadline, dl)
			}
		})
	}
}

func TestComputeStreamBudget(t *testing.T) {
	p := &Profile{Name: "p", Default: 5 * time.Second, Min: time.Second, Max: 30 * time.Second, AllowInfinite: true}
	now := time.Unix(1000, 0)
	const none = time.Duration(-1)
	cases := []struct {
		name     string
		total    time.Duration
		callerDL time.Duration
		override time.Duration
		own      bool
		infinite bool
		timeout  time.Duration
		rule     Rule
	}{
		{"no total, nothing", 0, none, none, false, true, 0, RuleNone},
		{"policy total", 20 * time.Second, none, none, true, false, 20 * time.Second, RuleNone},
		{"policy total above max is not clamped", time.Hour, none, none, true, false, time.Hour, RuleNone},
		{"caller deadline not clamped", 0, time.Hour, none, false, true, time.Hour, RuleNone},
		{"caller deadline before total", 20 * time.Second, 2 * time.Second, none, false, false, 2 * time.Second, RuleNone},
		{"override replaces total", 20 * time.Second, none, 3 * time.Second, true, false, 3 * time.Second, RuleNone},
		{"override clamped", 20 * time.Second, none, time.Hour, true, false, 30 * time.Second, RuleAboveMax},
		{"override zero infinite", 20 * time.Second, none, 0, false, true, 0, RuleNone},
		{"override below min past deadline: kept", 0, 300 * time.Millisecond, 10 * time.Millisecond, false, false, 300 * time.Millisecond, RuleKeptCallerDeadline},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var dl time.Time
			hasDL := tc.callerDL != none
			if hasDL {
				dl = now.Add(tc.callerDL)
			}
			b := computeStreamBudget(p, StreamingPolicy{Initial: time.Second, Gap: time.Second, Total: tc.total}, now, dl, hasDL, tc.override, tc.override != none)
			if b.own != tc.own || b.infinite != tc.infinite || b.timeout != tc.timeout || b.rule != tc.rule {
				t.Errorf("got own=%v infinite=%v timeout=%v rule=%v; want own=%v infinite=%v timeout=%v rule=%v",
					b.own, b.infinite, b.timeout, b.rule, tc.own, tc.infinite, tc.timeout, tc.rule)
			}
		})
	}
}

func TestParseTimeoutMS(t *testing.T) {
	cases := []struct {
		in   string
		want uint32
		ok   bool
	}{
		{"0", 0, true},
		{"1", 1, true},
		{"1500", 1500, true},
		{"007", 7, true},
		{"4294967295", 4294967295, true},
		{"4294967296", 0, false},
		{"9999999999", 0, false},
		{"00000000001", 0, false}, // 11 digits
		{"", 0, false},
		{"-1", 0, false},
		{"+1", 0, false},
		{" 1", 0, false},
		{"1 ", 0, false},
		{"1.5", 0, false},
		{"1e3", 0, false},
		{"10ms", 0, false},
		{"0x10", 0, false},
		{"١٢", 0, false}, // non-ASCII digits
	}
	for _, tc := range cases {
		got, err := parseTimeoutMS(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("parseTimeoutMS(%q) = %d, %v; want %d, ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func TestCheckProfile(t *testing.T) {
	ok := Profile{Name: "x", Default: time.Second, Min: time.Millisecond, Max: time.Minute}
	cases := []struct {
		name string
		mod  func(*Profile)
		want string
	}{
		{"valid", func(*Profile) {}, ""},
		{"bad name", func(p *Profile) { p.Name = "Tool" }, "invalid profile name"},
		{"empty name", func(p *Profile) { p.Name = "" }, "invalid profile name"},
		{"negative", func(p *Profile) { p.Min = -time.Millisecond }, "Min must not be negative"},
		{"sub-ms", func(p *Profile) { p.Default = 1500 * time.Microsecond }, "Default must be whole milliseconds"},
		{"too large", func(p *Profile) { p.Max = 50 * 24 * time.Hour }, "Max must be at most"},
		{"zero default", func(p *Profile) { p.Default, p.Min = 0, 0 }, "Default must be greater than 0"},
		{"min > default", func(p *Profile) { p.Min = 2 * time.Second }, "Min (2000 ms) is greater than w: Default (1000 ms)"},
		{"default > max", func(p *Profile) { p.Max = 500 * time.Millisecond }, "w: Default (1000 ms) is greater than w: Max (500 ms)"},
	}
	for _, tc := range cases {
		p := ok
		tc.mod(&p)
		err := checkProfile(p, "w")
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		if err == nil || !contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to contain %q", tc.name, err, tc.want)
		}
	}
}
