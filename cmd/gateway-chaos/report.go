package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// recorder takes everything the load sees and files it under the current
// window: a baseline before any fault, then one per scenario (from its
// start to the next one's).
type recorder struct {
	mu      sync.Mutex
	cur     *window
	windows []*window
	lastOK  []time.Time // last successful call of each slot
	owners  []string    // last owner each slot's status named
}

func newRecorder(sessions int) *recorder {
	r := &recorder{lastOK: make([]time.Time, sessions), owners: make([]string, sessions)}
	now := time.Now()
	for i := range r.lastOK {
		r.lastOK[i] = now
	}
	return r
}

// window is what happened from start to end.
type window struct {
	name       string
	start, end time.Time

	calls        map[string]int64         // "Method outcome" → n
	examples     map[string]string        // a failed outcome → the status message of its first call
	failed       int64                    // unary calls that failed (after the client's retries)
	okRetried    int64                    // unary calls that succeeded after a retry
	longest      map[string]time.Duration // "Method via route" → its longest call (RunJob, SubmitJob)
	maxGap       []time.Duration          // each slot's longest time without a successful call
	lost         map[string]bool          // sessions the gateway said were gone
	misdelivered []string

	jobs        int
	jobEnds     map[string]int
	eventsLost  int
	doubled     int
	outOfOrder  int
	undelivered int // events never delivered by watches that did not reach the job's end
	unfinished  int // watches that did not reach the job's end
	resumes     int
	statuses    int            // the runtime's own status events in watched jobs (back_pressure)
	cuts        map[string]int // broken watches by code and reason

	ownersAtFault []string // each slot's owner at the fault
	ownerChanges  int      // slots whose owner at the window's end differs from ownersAtFault
	victims       []int    // slots owned by the faulted replica at the fault
	victim        string
	faultAt       time.Time
	faultEnd      time.Time
	recoveredIn   time.Duration // fault end → every session answered again (0: not seen)
	notRecovered  int           // sessions with no success after the fault end when the window closed
	notes         []string
}

func newWindow(name string, sessions int, now time.Time) *window {
	return &window{name: name, start: now, calls: map[string]int64{}, examples: map[string]string{}, maxGap: make([]time.Duration, sessions),
		lost: map[string]bool{}, jobEnds: map[string]int{}, cuts: map[string]int{}, longest: map[string]time.Duration{}}
}

// begin closes the current window and opens name's.
func (r *recorder) begin(name string) *window {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	r.closeLocked(now)
	w := newWindow(name, len(r.lastOK), now)
	r.cur = w
	r.windows = append(r.windows, w)
	return w
}

// finish closes the current window.
func (r *recorder) finish() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closeLocked(time.Now())
	r.cur = nil
}

func (r *recorder) closeLocked(now time.Time) {
	w := r.cur
	if w == nil {
		return
	}
	w.end = now
	for s, o := range w.ownersAtFault {
		if o != "" && r.owners[s] != "" && r.owners[s] != o {
			w.ownerChanges++
		}
	}
	for s, t := range r.lastOK {
		w.maxGap[s] = max(w.maxGap[s], now.Sub(later(t, w.start)))
		if !w.faultEnd.IsZero() && t.Before(w.faultEnd) {
			w.notRecovered++
		}
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// call files one unary call's outcome. Only calls the session's owner must
// serve (RunJob, SubmitJob) count for the session's outage: any replica
// answers GetSessionStatus from the directory, owner or not.
// took is how long the call lasted (retries included).
func (r *recorder) call(method, via string, slot int, err error, attempts int32, at time.Time, took time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.cur
	if w == nil {
		return
	}
	if method == "RunJob" || method == "SubmitJob" {
		k := method + " via " + via
		w.longest[k] = max(w.longest[k], took)
	}
	outcome := "OK"
	switch {
	case err == nil && attempts > 1:
		outcome = "OK after retry"
		w.okRetried++
	case err != nil:
		outcome = reason(err)
		w.failed++
	}
	key := method + " via " + via + " " + outcome
	w.calls[key]++
	if err != nil && w.examples[key] == "" {
		w.examples[key] = status.Convert(err).Message()
	}
	if err == nil && method != "GetSessionStatus" && method != "OpenSession" {
		w.maxGap[slot] = max(w.maxGap[slot], at.Sub(later(r.lastOK[slot], w.start)))
		r.lastOK[slot] = at
	}
}

func (r *recorder) owner(slot int, instance string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.owners[slot] = instance
}

func (r *recorder) misdelivered(what string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if w := r.cur; w != nil {
		w.misdelivered = append(w.misdelivered, what)
	}
}

// sessionLost notes id as lost; false when it was noted already.
func (r *recorder) sessionLost(slot int, id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.cur
	if w == nil || w.lost[id] {
		return false
	}
	w.lost[id] = true
	return true
}

func (r *recorder) resume() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if w := r.cur; w != nil {
		w.resumes++
	}
}

// runtimeStatus files a status event the runtime added to a watched job
// (a "phase", such as back_pressure when acks lag): the job's own event,
// not the agent's, and not another job's.
func (r *recorder) runtimeStatus() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if w := r.cur; w != nil {
		w.statuses++
	}
}

// watchCut files a broken WatchJob stream. A cut that is not UNAVAILABLE
// (the code a caller resumes on) is a failed call too.
func (r *recorder) watchCut(via string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if w := r.cur; w != nil {
		key := "via " + via + " " + reason(err)
		w.cuts[key]++
		if w.examples["WatchJob "+key] == "" {
			msg := status.Convert(err).Message()
			if !w.faultAt.IsZero() {
				// When the first such cut came says what cut it: the
				// fault, the takeover, or the thaw of a frozen replica.
				msg += fmt.Sprintf(" [first %.2fs after the fault began]", time.Since(w.faultAt).Seconds())
			}
			w.examples["WatchJob "+key] = msg
		}
		if status.Code(err) != codes.Unavailable {
			w.failed++
		}
	}
}

// watchEnded files a watched job: its end, and what its deliveries say.
func (r *recorder) watchEnded(jc *jobCheck, end string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.cur
	if w == nil {
		return
	}
	w.jobs++
	w.jobEnds[end]++
	if end != "result" && !strings.HasPrefix(end, "job error") {
		w.unfinished++
	}
	w.outOfOrder += jc.outOfOrder
	for i, n := range jc.seen {
		switch {
		case n > 1:
			w.doubled += n - 1
		case n == 1:
		case jc.result || i < jc.high:
			// The job ended, or a later event came: this one never will.
			w.eventsLost++
		default:
			w.undelivered++
		}
	}
}

// markFault notes the fault's start and, for a replica fault, which
// sessions the victim owned (by the last status each session answered).
func (r *recorder) markFault(w *window, victim string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	w.faultAt, w.victim = time.Now(), victim
	w.ownersAtFault = slices.Clone(r.owners)
	w.notes = append(w.notes, "fault at +"+w.faultAt.Sub(w.start).Round(time.Millisecond).String())
	if victim == "" {
		return
	}
	for s, o := range r.owners {
		if o == victim {
			w.victims = append(w.victims, s)
		}
	}
}

func (r *recorder) markFaultEnd(w *window) {
	r.mu.Lock()
	defer r.mu.Unlock()
	w.faultEnd = time.Now()
	w.notes = append(w.notes, "fault ended at +"+w.faultEnd.Sub(w.start).Round(time.Millisecond).String())
}

// answeredSince reports whether every slot has had a successful call
// after t.
func (r *recorder) answeredSince(t time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ok := range r.lastOK {
		if !ok.After(t) {
			return false
		}
	}
	return true
}

// ownersOf counts the slots each instance owned at the last status.
func (r *recorder) ownersOf() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := map[string]int{}
	for _, o := range r.owners {
		if o != "" {
			m[o]++
		}
	}
	return m
}

func (r *recorder) note(w *window, format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	w.notes = append(w.notes, fmt.Sprintf(format, args...))
}

// Report is what a run prints, as text or JSON.
type Report struct {
	Mode                string           `json:"mode"` // "short" or "full"
	LeaseTTLSeconds     float64          `json:"lease_ttl_seconds"`
	Sessions            int              `json:"sessions"`
	Watchers            int              `json:"watchers"`
	EventsPerJob        int              `json:"events_per_job"`
	ThinkMS             int64            `json:"think_ms"` // a RunJob loop's pause between calls
	EnforceAvailability bool             `json:"enforce_availability"`
	Scenarios           []ScenarioReport `json:"scenarios"`
	// Pass: no enforced check failed (and the run itself did not fail).
	Pass  bool   `json:"pass"`
	Error string `json:"error,omitempty"`
}

// ScenarioReport is one window's figures and checks.
type ScenarioReport struct {
	Name     string  `json:"name"`
	Fault    string  `json:"fault,omitempty"`
	Seconds  float64 `json:"seconds"`
	Victim   string  `json:"victim,omitempty"`
	Victims  int     `json:"victim_sessions,omitempty"` // sessions the victim owned at the fault
	Recovery float64 `json:"recovery_seconds,omitempty"`
	// NotRecovered: sessions with no successful call after the fault ended
	// when the window closed.
	NotRecovered int `json:"not_recovered,omitempty"`
	// OwnerChanges: sessions whose owner at the end differs from the owner
	// at the fault, both by the prober's last GetSessionStatus answer for
	// the session (it visits each session every second or so: a change
	// back and forth between two visits is not seen).
	OwnerChanges int `json:"owner_changes"`

	Calls        map[string]int64  `json:"calls"`    // "Method outcome" → n; an outcome is OK, "OK after retry", or "CODE REASON"
	Examples     map[string]string `json:"examples"` // each failed outcome (and watch cut) → the status message of its first call
	FailedCalls  int64             `json:"failed_calls"`
	OKAfterRetry int64             `json:"ok_after_retry"`
	// LongestCall: "Method via route" → its longest call, in seconds (a
	// call held by a frozen replica shows here).
	LongestCall     map[string]float64 `json:"longest_call_seconds"`
	OutageMax       float64            `json:"outage_max_seconds"` // longest gap between successful calls of one session
	OutageP50       float64            `json:"outage_p50_seconds"`
	VictimOutageP50 float64            `json:"victim_outage_p50_seconds,omitempty"`
	Misdelivered    int                `json:"misdelivered"`
	Misdeliveries   []string           `json:"misdeliveries,omitempty"` // the first few
	SessionsLost    int                `json:"sessions_lost"`
	Jobs            int                `json:"jobs_watched"`
	JobEnds         map[string]int     `json:"job_ends"`
	EventsLost      int                `json:"events_lost"`
	EventsDoubled   int                `json:"events_doubled"`
	OutOfOrder      int                `json:"events_out_of_order"`
	Undelivered     int                `json:"events_undelivered"` // by watches that gave up or whose session was lost
	Unfinished      int                `json:"watches_unfinished"` // watches that gave up or whose session was lost
	WatchResumes    int                `json:"watch_resumes"`
	RuntimeStatuses int                `json:"runtime_status_events"`
	WatchCuts       map[string]int     `json:"watch_cuts"`
	Notes           []string           `json:"notes,omitempty"`
	Checks          []Check            `json:"checks"`
}

// Check is one threshold. Enforced checks fail the run; the others are
// printed (availability checks before -enforce-availability).
type Check struct {
	Name     string  `json:"name"`
	Limit    float64 `json:"limit"`
	Value    float64 `json:"value"`
	Pass     bool    `json:"pass"`
	Enforced bool    `json:"enforced"`
	Kind     string  `json:"kind"` // "safety" or "availability"
}

// scenarioReport turns a closed window into figures and checks.
func scenarioReport(w *window, fault string, ttl time.Duration, enforce bool) ScenarioReport {
	gaps := slices.Clone(w.maxGap)
	slices.Sort(gaps)
	var vg []time.Duration
	for _, s := range w.victims {
		vg = append(vg, w.maxGap[s])
	}
	slices.Sort(vg)
	sr := ScenarioReport{
		Name: w.name, Fault: fault, Seconds: w.end.Sub(w.start).Seconds(), Victim: w.victim, Victims: len(w.victims),
		Recovery: w.recoveredIn.Seconds(), NotRecovered: w.notRecovered, OwnerChanges: w.ownerChanges,
		Calls: w.calls, Examples: w.examples, FailedCalls: w.failed, OKAfterRetry: w.okRetried, LongestCall: longestOf(w.longest),
		OutageMax: gaps[len(gaps)-1].Seconds(), OutageP50: gaps[len(gaps)/2].Seconds(),
		Misdelivered: len(w.misdelivered), SessionsLost: len(w.lost),
		Jobs: w.jobs, JobEnds: w.jobEnds, EventsLost: w.eventsLost, EventsDoubled: w.doubled, OutOfOrder: w.outOfOrder,
		Undelivered: w.undelivered, Unfinished: w.unfinished, WatchResumes: w.resumes, RuntimeStatuses: w.statuses, WatchCuts: w.cuts, Notes: w.notes,
	}
	if len(vg) > 0 {
		sr.VictimOutageP50 = vg[len(vg)/2].Seconds()
	}
	sr.Misdeliveries = w.misdelivered[:min(len(w.misdelivered), 5)]
	add := func(name, kind string, limit, value float64) {
		sr.Checks = append(sr.Checks, Check{Name: name, Limit: limit, Value: value, Pass: value <= limit,
			Enforced: kind == "safety" || enforce, Kind: kind})
	}
	add("misdelivered", "safety", 0, float64(sr.Misdelivered))
	add("events lost", "safety", 0, float64(sr.EventsLost))
	add("events doubled", "safety", 0, float64(sr.EventsDoubled))
	add("events out of order", "safety", 0, float64(sr.OutOfOrder))
	if w.name == "baseline" {
		return sr
	}
	add("sessions lost", "availability", 0, float64(sr.SessionsLost))
	add("watches not finished", "availability", 0, float64(sr.Unfinished))
	switch w.name {
	case "rolling":
		add("failed calls", "availability", 0, float64(sr.FailedCalls))
	case "kill", "freeze":
		add("outage max (s) ≤ TTL + 1 s", "availability", (ttl + time.Second).Seconds(), sr.OutageMax)
	}
	return sr
}

// failed lists the enforced checks that failed.
func (sr ScenarioReport) failed() []string {
	var out []string
	for _, c := range sr.Checks {
		if c.Enforced && !c.Pass {
			out = append(out, c.Name)
		}
	}
	return out
}

func writeJSON(w io.Writer, rep *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

func writeText(out io.Writer, rep *Report) {
	fmt.Fprintf(out, "gateway-chaos (%s): 3 replicas, nginx, redis-server, lease TTL %gs; %d sessions (RunJob every %d ms after the last answer), %d watchers of %d+ events\n",
		rep.Mode, rep.LeaseTTLSeconds, rep.Sessions, rep.ThinkMS, rep.Watchers, rep.EventsPerJob)
	for _, sr := range rep.Scenarios {
		tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
		fmt.Fprintf(tw, "\n== %s\t%s (%.1fs)\n", sr.Name, sr.Fault, sr.Seconds)
		if sr.Victim != "" {
			fmt.Fprintf(tw, "victim\t%s, owner of %d sessions at the fault\n", sr.Victim, sr.Victims)
		}
		if sr.Recovery > 0 {
			fmt.Fprintf(tw, "every session answered again\t%.2fs after the fault ended\n", sr.Recovery)
		}
		if sr.NotRecovered > 0 {
			fmt.Fprintf(tw, "sessions without an answer since the fault ended\t%d\n", sr.NotRecovered)
		}
		keys := make([]string, 0, len(sr.Calls))
		for k := range sr.Calls {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			fmt.Fprintf(tw, "calls %s\t%d\n", k, sr.Calls[k])
			if m := sr.Examples[k]; m != "" {
				fmt.Fprintf(tw, "  first message\t%s\n", clip(m))
			}
		}
		if sr.Name != "baseline" {
			fmt.Fprintf(tw, "sessions whose owner changed (prober's last answers)\t%d\n", sr.OwnerChanges)
		}
		fmt.Fprintf(tw, "failed calls (after the client's retries)\t%d\n", sr.FailedCalls)
		fmt.Fprintf(tw, "calls OK after a retry\t%d\n", sr.OKAfterRetry)
		for _, k := range slices.Sorted(maps.Keys(sr.LongestCall)) {
			fmt.Fprintf(tw, "longest call %s\t%.2fs\n", k, sr.LongestCall[k])
		}
		fmt.Fprintf(tw, "outage per session (max, p50)\t%.2fs, %.2fs\n", sr.OutageMax, sr.OutageP50)
		if sr.Victims > 0 {
			fmt.Fprintf(tw, "outage p50 of the victim's sessions\t%.2fs\n", sr.VictimOutageP50)
		}
		fmt.Fprintf(tw, "misdelivered\t%d\n", sr.Misdelivered)
		for _, m := range sr.Misdeliveries {
			fmt.Fprintf(tw, "  misdelivery\t%s\n", m)
		}
		fmt.Fprintf(tw, "sessions lost\t%d\n", sr.SessionsLost)
		fmt.Fprintf(tw, "jobs watched\t%d (%s)\n", sr.Jobs, countsText(sr.JobEnds))
		fmt.Fprintf(tw, "events lost, doubled, out of order\t%d, %d, %d\n", sr.EventsLost, sr.EventsDoubled, sr.OutOfOrder)
		fmt.Fprintf(tw, "watches not finished, their events undelivered\t%d, %d\n", sr.Unfinished, sr.Undelivered)
		fmt.Fprintf(tw, "watch resumes\t%d\n", sr.WatchResumes)
		fmt.Fprintf(tw, "runtime status events in watched jobs\t%d\n", sr.RuntimeStatuses)
		fmt.Fprintf(tw, "watch cuts\t%s\n", countsText(sr.WatchCuts))
		cuts := make([]string, 0, len(sr.WatchCuts))
		for k := range sr.WatchCuts {
			cuts = append(cuts, k)
		}
		slices.Sort(cuts)
		for _, k := range cuts {
			fmt.Fprintf(tw, "  first message of %s\t%s\n", k, clip(sr.Examples["WatchJob "+k]))
		}
		for _, n := range sr.Notes {
			fmt.Fprintf(tw, "note\t%s\n", n)
		}
		for _, c := range sr.Checks {
			verdict := "ok"
			switch {
			case !c.Pass && c.Enforced:
				verdict = "FAIL"
			case !c.Pass:
				verdict = "fail (not enforced: -enforce-availability)"
			}
			fmt.Fprintf(tw, "check %s\t%s %g ≤ %g: %s\n", c.Kind, c.Name, c.Value, c.Limit, verdict)
		}
		_ = tw.Flush()
	}
	verdict := "PASS"
	if !rep.Pass {
		verdict = "FAIL"
	}
	if rep.Error != "" {
		fmt.Fprintf(out, "\nrun error: %s\n", rep.Error)
	}
	fmt.Fprintf(out, "\n%s\n", verdict)
}

// clip shortens a status message for the text report (JSON has it whole).
func clip(m string) string {
	m = strings.ReplaceAll(m, "\n", " ")
	if len(m) > 160 {
		return m[:160] + "…"
	}
	return m
}

// countsText lists counts by key, keys sorted: "A 2, B 1", or "none".
func countsText[V int | int64](counts map[string]V) string {
	if len(counts) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, counts[k])
	}
	return strings.Join(parts, ", ")
}

func longestOf(m map[string]time.Duration) map[string]float64 {
	out := make(map[string]float64, len(m))
	for k, d := range m {
		out[k] = d.Seconds()
	}
	return out
}
