package main

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"time"
)

// proxyMarker identifies goroutines of the fault-injecting proxy. They are
// the test rig's, not the gateway's, and are counted apart: toxiproxy's link
// goroutines may outlive a connection its toxic cut.
const proxyMarker = "github.com/Shopify/toxiproxy/"

// goroutineSnapshot is the process's goroutines, grouped by where they
// were created and where they are now.
type goroutineSnapshot struct {
	total  int            // all goroutines but the proxy's
	proxy  int            // the proxy's
	groups map[string]int // signature → count, proxy excluded
}

func takeGoroutines() goroutineSnapshot {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	snap := goroutineSnapshot{groups: map[string]int{}}
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.TrimSpace(g) == "" {
			continue
		}
		if strings.Contains(g, proxyMarker) {
			snap.proxy++
			continue
		}
		snap.total++
		snap.groups[signature(g)]++
	}
	return snap
}

// signature names a goroutine by its innermost function (after runtime
// frames) and its creator.
func signature(g string) string {
	lines := strings.Split(g, "\n")
	top, creator := "", ""
	for i := 1; i < len(lines); i++ {
		l := lines[i]
		if strings.HasPrefix(l, "\t") || l == "" {
			continue
		}
		if strings.HasPrefix(l, "created by ") {
			creator = strings.TrimPrefix(l, "created by ")
			if j := strings.Index(creator, " in goroutine"); j >= 0 {
				creator = creator[:j]
			}
			continue
		}
		fn := l
		if j := strings.LastIndex(fn, "("); j > 0 {
			fn = fn[:j]
		}
		if top == "" && !strings.HasPrefix(fn, "runtime.") && !strings.HasPrefix(fn, "internal/") &&
			!strings.HasPrefix(fn, "sync.") && !strings.HasPrefix(fn, "time.Sleep") {
			top = fn
		}
	}
	return top + " ← " + creator
}

// growth lists the groups that have more goroutines in s than in base.
func (s goroutineSnapshot) growth(base goroutineSnapshot) []string {
	var out []string
	for sig, n := range s.groups {
		if d := n - base.groups[sig]; d > 0 {
			out = append(out, fmt.Sprintf("+%d %s", d, sig))
		}
	}
	slices.Sort(out)
	return out
}

// waitGoroutines waits, at most until ctx ends, for the goroutine count
// (proxy excluded) to come back to base.total+tolerance, and returns the
// last snapshot.
func waitGoroutines(ctx context.Context, base goroutineSnapshot, tolerance int) goroutineSnapshot {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		runtime.GC()
		s := takeGoroutines()
		if s.total <= base.total+tolerance {
			return s
		}
		select {
		case <-ctx.Done():
			return s
		case <-tick.C:
		}
	}
}
