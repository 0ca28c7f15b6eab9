package main

import (
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/sessiongate/sessiongate/gateway/upstream"
)

// Report is what a soak prints, as text or JSON.
type Report struct {
	Dialect     string `json:"dialect"`
	Seed        uint64 `json:"seed"`
	Duration    string `json:"duration"`
	LoadElapsed string `json:"load_elapsed"`

	Actions    map[string]int            `json:"actions"`
	Calls      map[string]map[string]int `json:"calls"`       // rpc → gRPC code → n
	Reasons    map[string]int            `json:"reasons"`     // "rpc code reason[:limit]" → n, errors only
	StreamEnds map[string]int            `json:"stream_ends"` // definite ends of WatchJob streams: "code reason[:limit]" → n
	Watchers   map[string]int            `json:"watchers"`    // WatchJob streams by kind
	NonReading map[string]int            `json:"non_reading"` // how non-reading watchers ended
	Sessions   SessionFigures            `json:"sessions"`
	Faults     map[string]int            `json:"faults"`
	Upstream   map[string]uint64         `json:"upstream"` // the gateway's upstream counters (non-zero)
	Runtime    map[string]int64          `json:"runtime"`  // the reference runtime's counters
	// RetainedAfter is the gateway's retained-bytes budget in use once every
	// session is closed (should be 0); Overreleased counts releases of more
	// than was held (a bug of the releaser).
	RetainedAfter int64  `json:"retained_bytes_after"`
	Overreleased  uint64 `json:"retained_overreleased"`

	Streams          int `json:"streams_checked"`
	Events           int `json:"events_checked"`
	Misdeliveries    int `json:"misdeliveries"`
	EventsLost       int `json:"events_lost"`
	EventsDuplicated int `json:"events_duplicated"`
	NoDefiniteEnd    int `json:"calls_without_definite_end"`

	Goroutines GoroutineFigures    `json:"goroutines"`
	Heap       HeapFigures         `json:"heap"`
	Samples    map[string][]string `json:"samples,omitempty"` // the first violations of each kind
	Notes      []string            `json:"notes,omitempty"`   // outcomes that are definite but read as a gateway fault
	Violations []string            `json:"violations"`
	Pass       bool                `json:"pass"`
}

// SessionFigures count the soak's sessions.
type SessionFigures struct {
	Slots  int `json:"slots"`  // sessions held at a time
	Opened int `json:"opened"` // OpenSession successes
	Lost   int `json:"lost"`   // found NOT_FOUND without the soak closing them
}

// GoroutineFigures: the proxy's goroutines are counted apart, and not in
// the leak check.
type GoroutineFigures struct {
	Before      int      `json:"before"`
	After       int      `json:"after"`
	Tolerance   int      `json:"tolerance"`
	Leaked      int      `json:"leaked"`
	Growth      []string `json:"growth,omitempty"`
	ProxyBefore int      `json:"proxy_before"`
	ProxyAfter  int      `json:"proxy_after"`
}

// HeapFigures are runtime.MemStats after a GC.
type HeapFigures struct {
	BeforeAlloc uint64 `json:"before_alloc"`
	AfterAlloc  uint64 `json:"after_alloc"`
	BeforeInuse uint64 `json:"before_inuse"`
	AfterInuse  uint64 `json:"after_inuse"`
}

// finish lists the violations and sets Pass.
func (r *Report) finish() {
	r.Violations = []string{}
	add := func(n int, what string) {
		if n > 0 {
			r.Violations = append(r.Violations, fmt.Sprintf("%d %s", n, what))
		}
	}
	add(r.Misdeliveries, "misdeliveries")
	add(r.EventsLost, "events lost")
	add(r.EventsDuplicated, "events duplicated")
	add(r.Goroutines.Leaked, "goroutines leaked")
	add(r.NoDefiniteEnd, "calls without a definite end")
	if r.RetainedAfter != 0 || r.Overreleased != 0 {
		r.Violations = append(r.Violations, fmt.Sprintf("retained-bytes budget leaked: %d bytes still in use after every session closed, %d over-releases", r.RetainedAfter, r.Overreleased))
	}
	r.Pass = len(r.Violations) == 0
	for _, k := range sortedKeys(r.Reasons) {
		for _, code := range []string{" Internal ", " Unknown ", " DataLoss "} {
			if strings.Contains(k, code) {
				r.Notes = append(r.Notes, fmt.Sprintf("%d × %s: a definite end, but a code that reads as a gateway fault (see the gateway's log with -v)", r.Reasons[k], k))
			}
		}
	}
}

// counterMap reads every upstream counter by reflection (non-zero only), in
// snake_case as on /metrics.
func counterMap(c *upstream.Counters) map[string]uint64 {
	out := map[string]uint64{}
	v := reflect.ValueOf(c).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		ctr, ok := f.Addr().Interface().(*atomic.Uint64)
		if !ok {
			continue
		}
		if n := ctr.Load(); n > 0 {
			out[snake(v.Type().Field(i).Name)] = n
		}
	}
	return out
}

func snake(s string) string {
	upper := func(i int) bool { return i >= 0 && i < len(s) && s[i] >= 'A' && s[i] <= 'Z' }
	var b strings.Builder
	for i := range len(s) {
		c := s[i]
		if upper(i) {
			// A word starts at an upper-case letter after a lower-case one,
			// or at the last capital of an acronym (JobIDReused: job_id_reused).
			if i > 0 && (!upper(i-1) || i+1 < len(s) && !upper(i+1)) {
				b.WriteByte('_')
			}
			c += 'a' - 'A'
		}
		b.WriteByte(c)
	}
	return b.String()
}

func writeJSON(w io.Writer, r *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

func writeText(w io.Writer, r *Report) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	p("gateway-soak: dialect %s, seed %d, load %s (ran %s)", r.Dialect, r.Seed, r.Duration, r.LoadElapsed)
	p("")
	p("calls by RPC × outcome:")
	for _, rpc := range sortedKeys(r.Calls) {
		var parts []string
		for _, code := range sortedKeys(r.Calls[rpc]) {
			parts = append(parts, fmt.Sprintf("%s %d", code, r.Calls[rpc][code]))
		}
		p("  %-34s %s", rpc, strings.Join(parts, ", "))
	}
	p("errors by reason:")
	for _, k := range sortedKeys(r.Reasons) {
		p("  %-70s %d", k, r.Reasons[k])
	}
	p("definite stream ends (WatchJob ended with an error):")
	for _, k := range sortedKeys(r.StreamEnds) {
		p("  %-50s %d", k, r.StreamEnds[k])
	}
	p("watchers: %s", kv(r.Watchers))
	p("non-reading watchers: %s", kv(r.NonReading))
	p("actions: %s", kv(r.Actions))
	p("sessions: %d slots, %d opened, %d lost", r.Sessions.Slots, r.Sessions.Opened, r.Sessions.Lost)
	p("")
	p("faults injected: %s", kv(r.Faults))
	p("upstream counters: %s", kv(r.Upstream))
	p("runtime: %s", kv(r.Runtime))
	p("retained bytes after: %d in use, %d over-released", r.RetainedAfter, r.Overreleased)
	p("")
	p("streams checked %d, events checked %d", r.Streams, r.Events)
	p("misdeliveries %d, events lost %d, events duplicated %d, calls without a definite end %d",
		r.Misdeliveries, r.EventsLost, r.EventsDuplicated, r.NoDefiniteEnd)
	p("goroutines: before %d, after %d (tolerance %d, leaked %d); proxy's apart: %d → %d",
		r.Goroutines.Before, r.Goroutines.After, r.Goroutines.Tolerance, r.Goroutines.Leaked, r.Goroutines.ProxyBefore, r.Goroutines.ProxyAfter)
	for _, g := range r.Goroutines.Growth {
		p("  %s", g)
	}
	p("heap: alloc %s → %s, in use %s → %s", mib(r.Heap.BeforeAlloc), mib(r.Heap.AfterAlloc), mib(r.Heap.BeforeInuse), mib(r.Heap.AfterInuse))
	for _, k := range sortedKeys(r.Samples) {
		p("%s:", k)
		for _, s := range r.Samples[k] {
			p("  %s", s)
		}
	}
	for _, n := range r.Notes {
		p("note: %s", n)
	}
	if r.Pass {
		p("PASS")
	} else {
		p("FAIL: %s", strings.Join(r.Violations, ", "))
	}
}

func mib(n uint64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

func kv[V any](m map[string]V) string {
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%s %v", k, m[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
