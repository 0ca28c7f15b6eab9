package cluster

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// callOutcome is how one simulated call ended.
type callOutcome struct {
	steps, forwards int
	paused          time.Duration
	end             string
}

// runCall simulates one call on the replica that received it, routed as
// gateway/server's clusterUnary routes it, under a random schedule of
// routing answers: a wait (OWNER_SUSPECT, LEASE_LAPSED, a hand-off, a
// detach under the handler, a silent owner's lease ending), a forward to one of three owners that is
// answered or refused (or never sent), or the call served here. It returns
// an error naming the first broken invariant:
//
//   - the call ends with an answer: served, the owner's answer, the
//     routing's error, or a refusal it was given; never with none;
//   - its pauses stay within Limit and end WaitReserve before its deadline;
//   - no forward goes to the replica that just refused it without a pause
//     between, but the first forward goes at once;
//   - a wait for a silent owner's lease end (PauseUntil) routes again at
//     that end when it falls within the wait;
//   - it ends within a bounded number of routings.
func runCall(seed uint64, broken string) (callOutcome, error) {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	now := time.Unix(1_700_000_000, 0)
	var deadline time.Time
	if rng.IntN(3) > 0 {
		deadline = now.Add(time.Duration(20+rng.IntN(5000)) * time.Millisecond)
	}
	limit := time.Duration(rng.IntN(2500)-200) * time.Millisecond // some ≤ 0: no wait
	w := CallWait{Limit: limit, broken: broken}
	owners := []string{"gw-1", "gw-2", "gw-3"}
	var out callOutcome
	refusals := 0
	lastTo, pausedSince := "", true
	pWait, pForward := rng.IntN(100), rng.IntN(100) // this schedule's mix
	pAnswered := rng.IntN(100)
	for out.steps = 1; out.steps <= 1000; out.steps++ {
		now = now.Add(time.Duration(rng.IntN(30)) * time.Millisecond) // a routing's own cost
		r := rng.IntN(200)
		switch {
		case r < pWait/4:
			// Await: a silent owner's lease ends in up to 1.2 s.
			end := now.Add(time.Duration(rng.IntN(1200)) * time.Millisecond)
			d, ok := w.PauseUntil(now, deadline, end)
			if !ok {
				out.end = "routing error"
				return out, nil
			}
			if err := checkPause(&out, d, now, deadline, limit); err != nil {
				return out, err
			}
			// Within the wait, the call routes again at the lease's end:
			// not before (it would forward to the silent owner again),
			// not after (the session waits to be taken over).
			if want := max(end.Sub(now), time.Millisecond); now.Add(want).Before(w.until) && d != want {
				return out, fmt.Errorf("step %d: paused %v, routed again before or after the lease's end %v (within the wait)", out.steps, d, want)
			}
			now, pausedSince = now.Add(d), true
		case r < pWait:
			d, ok := w.Pause(now, deadline)
			if !ok {
				out.end = "routing error"
				return out, nil
			}
			if err := checkPause(&out, d, now, deadline, limit); err != nil {
				return out, err
			}
			now, pausedSince = now.Add(d), true
		case r < pWait+pForward:
			o := owners[rng.IntN(len(owners))]
			first := w.Forwards() == 0
			d, ok := w.Forward(now, deadline, o, o+":1")
			if !ok {
				if refusals == 0 {
					return out, fmt.Errorf("step %d: no forward and no refusal to answer with: the call ends without an answer", out.steps)
				}
				out.end = "last refusal"
				return out, nil
			}
			if first && d != 0 {
				return out, fmt.Errorf("step %d: the call's first forward (to %s) paused %v", out.steps, o, d)
			}
			if d > 0 {
				if err := checkPause(&out, d, now, deadline, limit); err != nil {
					return out, err
				}
				now, pausedSince = now.Add(d), true
			}
			if o == lastTo && !pausedSince {
				return out, fmt.Errorf("step %d: forwarded again to %s, which just refused it, without a pause", out.steps, o)
			}
			out.forwards++
			if rng.IntN(100) < pAnswered {
				out.end = "owner's answer"
				return out, nil
			}
			w.Refused(o, o+":1")
			refusals++
			lastTo, pausedSince = o, false
		default:
			out.end = "served"
			return out, nil
		}
	}
	return out, fmt.Errorf("the call was routed %d times without ending", out.steps)
}

func checkPause(out *callOutcome, d time.Duration, now, deadline time.Time, limit time.Duration) error {
	out.paused += d
	if out.paused > max(limit, 0) {
		return fmt.Errorf("step %d: paused %v in all, over the limit %v", out.steps, out.paused, limit)
	}
	if !deadline.IsZero() && now.Add(d).After(deadline.Add(-WaitReserve)) {
		return fmt.Errorf("step %d: a pause ends %v before the deadline, inside its reserve", out.steps, deadline.Sub(now.Add(d)))
	}
	return nil
}

// TestCallWaitProperty runs random, replayable call schedules (seed in the
// failure) against CallWait's rules.
func TestCallWaitProperty(t *testing.T) {
	seeds := uint64(20_000)
	if testing.Short() {
		seeds = 5_000
	}
	ends := map[string]int{}
	var steps, forwards int
	for seed := uint64(1); seed <= seeds; seed++ {
		out, err := runCall(seed, "")
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		ends[out.end]++
		steps += out.steps
		forwards += out.forwards
	}
	// Every kind of end happens: the schedules reach what they are for.
	for _, e := range []string{"routing error", "last refusal", "owner's answer", "served"} {
		if ends[e] == 0 {
			t.Fatalf("no schedule ended with %q: %v", e, ends)
		}
	}
	t.Logf("%d schedules, %d routings, %d forwards, ends %v", seeds, steps, forwards, ends)
}

// TestCallWaitCatchesBrokenRules: the property test fails when a rule is
// removed: "pace-by-attempt" is the rule before the fix (a first forward
// after a pause waited like a re-route, and when the wait was over the call
// had no answer), "no-pause-same" forwards again at once to the replica that
// just refused.
func TestCallWaitCatchesBrokenRules(t *testing.T) {
	for _, c := range []struct{ rule, caught string }{
		{"pace-by-attempt", "ends without an answer"},
		{"pace-by-attempt", "first forward"},
		{"no-pause-same", "without a pause"},
		{"await-blind", "the lease's end"},
	} {
		t.Run(c.rule+"/"+c.caught, func(t *testing.T) {
			for seed := uint64(1); seed <= 20_000; seed++ {
				if _, err := runCall(seed, c.rule); err != nil && strings.Contains(err.Error(), c.caught) {
					t.Logf("broken rule %q caught at seed %d: %v", c.rule, seed, err)
					return
				}
			}
			t.Fatalf("broken rule %q was not caught (%q) in 20,000 seeds", c.rule, c.caught)
		})
	}
}
