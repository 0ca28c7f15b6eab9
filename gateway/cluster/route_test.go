package cluster

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestRouteInvariants enumerates every combination of facts and checks the
// package's invariants for each.
func TestRouteInvariants(t *testing.T) {
	n, err := checkRoute(Route)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d combinations checked", n)
}

// TestRouteAwaitRuleCaught: without the Await rule a call is forwarded to
// a silent owner whose lease ends within the first-byte bound (the forward
// then holds it past the takeover), and the invariants say so.
func TestRouteAwaitRuleCaught(t *testing.T) {
	broken := func(f Facts) Action {
		if a := Route(f); a != Await {
			return a
		}
		return Forward
	}
	if _, err := checkRoute(broken); err == nil || !strings.Contains(err.Error(), "no forward to a silent owner") {
		t.Fatalf("the route without Await passed the invariants: %v", err)
	}
}

// checkRoute enumerates every combination of facts and returns the first
// broken invariant of route.
func checkRoute(route func(Facts) Action) (n int, err error) {
	for bits := 0; bits < 1<<9; bits++ {
		for _, dir := range []Dir{DirUnavailable, DirNone, DirRecord} {
			for _, owner := range []string{"", "self", "other"} {
				for _, addr := range []string{"", "10.0.0.2:1"} {
					f := Facts{
						Self: "self", Local: bits&1 != 0, Forwarded: bits&2 != 0, ReadOnly: bits&4 != 0,
						Dir: dir, CallerMatches: bits&8 != 0, Owner: owner, OwnerLive: bits&16 != 0, OwnerAddr: addr,
						OwnerSilent: bits&32 != 0, FirstByte: time.Second,
					}
					switch bits >> 6 {
					case 1:
						f.OwnerLeaseLeft = 300 * time.Millisecond // ends within the bound
					case 2:
						f.OwnerLeaseLeft = 3 * time.Second
					case 3:
						f.OwnerLeaseLeft, f.FirstByte = 300*time.Millisecond, 0 // no bound
					}
					a := route(f)
					n++
					for _, c := range []struct {
						ok   bool
						rule string
					}{
						{!f.Local || a == Serve, "local is served here"},
						{!f.Forwarded || a != Forward, "a forwarded call is never forwarded again"},
						{!(owner == "other" && f.OwnerLive) || a != TakeOver, "a live owner is never taken over from"},
						{!f.ReadOnly || a != TakeOver, "a probe never takes over"},
						{f.Local || f.Dir != DirRecord || f.CallerMatches || a == NotFound, "another caller's session is NOT_FOUND"},
						{f.Local || f.Dir != DirUnavailable || a == Unavailable, "directory down: UNAVAILABLE, not NOT_FOUND"},
						{a != Forward || f.OwnerAddr != "", "forward needs an address"},
						{a != Serve || f.Local, "serve only what is held"},
						{a != Forward || !ending(f), "no forward to a silent owner whose lease ends within the first-byte bound"},
						{a != Await || (ending(f) && f.OwnerLive && owner == "other" && !f.Forwarded && !f.ReadOnly),
							"a call waits only for a silent owner's lease that ends within the bound, never for an answering or gone owner"},
					} {
						if !c.ok {
							return n, fmt.Errorf("%s broken: %+v -> %v", c.rule, f, a)
						}
					}
				}
			}
		}
	}
	return n, nil
}

func ending(f Facts) bool {
	return f.OwnerSilent && f.OwnerLeaseLeft > 0 && f.FirstByte > 0 && f.OwnerLeaseLeft <= f.FirstByte
}

// TestRouteBrokenRuleCaught shows that the invariant check catches a rule
// that forwards forwarded calls (the loop the hop header prevents).
func TestRouteBrokenRuleCaught(t *testing.T) {
	broken := func(f Facts) Action {
		if !f.Local && f.Dir == DirRecord && f.CallerMatches && f.OwnerLive && f.Owner != f.Self && f.OwnerAddr != "" {
			return Forward
		}
		return Route(f)
	}
	f := Facts{Self: "a", Forwarded: true, Dir: DirRecord, CallerMatches: true, Owner: "b", OwnerLive: true, OwnerAddr: "x:1"}
	if broken(f) != Forward || Route(f) != Misrouted {
		t.Fatal("the broken rule was not distinguished from Route")
	}
}

func TestRouteTable(t *testing.T) {
	for _, c := range []struct {
		name string
		f    Facts
		want Action
	}{
		{"local", Facts{Local: true}, Serve},
		{"redis down", Facts{Dir: DirUnavailable}, Unavailable},
		{"no record", Facts{Dir: DirNone}, NotFound},
		{"other caller", Facts{Dir: DirRecord, Owner: "b", OwnerLive: true, OwnerAddr: "b:1"}, NotFound},
		{"owned elsewhere", Facts{Self: "a", Dir: DirRecord, CallerMatches: true, Owner: "b", OwnerLive: true, OwnerAddr: "b:1"}, Forward},
		{"owner dead", Facts{Self: "a", Dir: DirRecord, CallerMatches: true, Owner: "b"}, TakeOver},
		{"released", Facts{Self: "a", Dir: DirRecord, CallerMatches: true, Owner: ""}, TakeOver},
		{"ours not held", Facts{Self: "a", Dir: DirRecord, CallerMatches: true, Owner: "a", OwnerLive: true, OwnerAddr: "a:1"}, TakeOver},
		{"probe owner dead", Facts{Self: "a", ReadOnly: true, Dir: DirRecord, CallerMatches: true, Owner: "b"}, Status},
		{"forwarded to a non-owner", Facts{Self: "a", Forwarded: true, Dir: DirRecord, CallerMatches: true, Owner: "b", OwnerLive: true, OwnerAddr: "b:1"}, Misrouted},
		{"forwarded, owner dead", Facts{Self: "a", Forwarded: true, Dir: DirRecord, CallerMatches: true, Owner: "b"}, TakeOver},
		{"silent owner, lease ending", Facts{Self: "a", Dir: DirRecord, CallerMatches: true, Owner: "b", OwnerLive: true, OwnerAddr: "b:1",
			OwnerSilent: true, OwnerLeaseLeft: 200 * time.Millisecond, FirstByte: 500 * time.Millisecond}, Await},
		{"silent owner, lease far from its end", Facts{Self: "a", Dir: DirRecord, CallerMatches: true, Owner: "b", OwnerLive: true, OwnerAddr: "b:1",
			OwnerSilent: true, OwnerLeaseLeft: 900 * time.Millisecond, FirstByte: 500 * time.Millisecond}, Forward},
		{"answering owner, lease ending", Facts{Self: "a", Dir: DirRecord, CallerMatches: true, Owner: "b", OwnerLive: true, OwnerAddr: "b:1",
			OwnerLeaseLeft: 200 * time.Millisecond, FirstByte: 500 * time.Millisecond}, Forward},
		{"silent owner, lease ending, forwarded call", Facts{Self: "a", Forwarded: true, Dir: DirRecord, CallerMatches: true, Owner: "b", OwnerLive: true,
			OwnerAddr: "b:1", OwnerSilent: true, OwnerLeaseLeft: 200 * time.Millisecond, FirstByte: 500 * time.Millisecond}, Misrouted},
	} {
		if got := Route(c.f); got != c.want {
			t.Errorf("%s: Route = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestAckWindow(t *testing.T) {
	t0 := time.Unix(1000, 0)
	w := AckWindow{Lag: time.Second}
	w.Observe(t0, 5)
	if got := w.Target(t0.Add(500 * time.Millisecond)); got != 0 {
		t.Fatalf("before the lag: %d", got)
	}
	w.Observe(t0.Add(600*time.Millisecond), 9)
	if got := w.Target(t0.Add(time.Second)); got != 5 {
		t.Fatalf("at the lag: %d, want 5", got)
	}
	w.Observe(t0.Add(1200*time.Millisecond), 12)
	if got := w.Target(t0.Add(1700 * time.Millisecond)); got != 9 {
		t.Fatalf("later: %d, want 9", got)
	}
	if got := w.Target(t0.Add(10 * time.Second)); got != 12 {
		t.Fatalf("long after: %d, want 12", got)
	}
	if len(w.samples) != 1 {
		t.Fatalf("kept %d samples", len(w.samples))
	}
}
