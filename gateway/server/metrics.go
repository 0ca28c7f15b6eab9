package server

import (
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"unicode"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sessiongate/sessiongate/gateway/budget"
	"github.com/sessiongate/sessiongate/gateway/session"
	"github.com/sessiongate/sessiongate/gateway/upstream"
)

// counterMetric names one field of upstream.Counters on /metrics, as
// sessiongate_upstream_<name>_total{runtime="…"}.
type counterMetric struct{ name, help string }

// counterMetrics documents every field of upstream.Counters. The collector
// walks the struct by reflection, so a field added later is exported even
// before it is named here (under its snake_case name, with a help text
// saying it is undocumented), and TestEveryCounterExported fails until it is
// named here and in docs/operations.md's metrics table.
var counterMetrics = map[string]counterMetric{
	"LateAnswers":        {"late_answers", "Upstream answers and events that matched no live caller or job (tombstoned or unknown)."},
	"StaleGeneration":    {"stale_generation", "Upstream frames dropped because they came from a transport already given up, or an accept of an older generation."},
	"OutcomeUnknown":     {"outcome_unknown", "Submits that failed with OUTCOME_UNKNOWN: the transport dropped before the runtime answered."},
	"Resends":            {"resends", "Submits written again under their idempotency key after a resume."},
	"JobIDReused":        {"job_id_reused", "Accepts naming another submit's job id (that submit fails with OUTCOME_UNKNOWN)."},
	"ReorderedEvents":    {"reordered_events", "Upstream sequenced frames that arrived ahead of a hole and were held until it closed."},
	"DuplicateAnswers":   {"duplicate_answers", "Second answers to one submit (an earlier write and its resend), dropped."},
	"BarrierTimeouts":    {"barrier_timeouts", "Reconciliation barriers the runtime left unanswered (the transport was dropped)."},
	"ReconciledByList":   {"reconciled_by_list", "Submits lost with a transport and found by trace id in a list_jobs answer."},
	"SerializedSubmits":  {"serialized_submits", "Times a submit was held back until the submits before it were answered: the runtime is not known to echo trace ids, or the trace id is shared."},
	"UnreadableAnswers":  {"unreadable_answers", "Unreadable answers from the runtime while submits waited (each drops the transport and reconciles)."},
	"UnreadableFailures": {"unreadable_failures", "Submits failed with RUNTIME_PROTOCOL_ERROR because the runtime answered them with unreadable frames three times."},
	"EchoLost":           {"echo_lost", "Accepts without a trace id from a runtime that had been echoing them (submits are then written one at a time)."},
	"Reattached":         {"reattached", "Live jobs the runtime stopped streaming after a resume, re-attached with job.subscribe."},
	"RejoinDropped":      {"rejoin_dropped", "Envelopes of a job observed through SubscribeJob dropped as its re-attachment's replay of ones already delivered."},
	"JobsLost":           {"jobs_lost", "Jobs ended with JOB_LOST: not streamed after a resume (or another session's) and not re-attachable."},
	"ForeignReplays":     {"foreign_replays", "Idempotent retries answered with another session's job, attached with job.subscribe."},
	"AdoptListings":      {"adopt_listings", "list_jobs listings made to adopt a taken-over session's jobs (one per generation at most)."},
	"AdoptRefined":       {"adopt_refined", "Adopted jobs whose history the job listing showed to start below the takeover's resume point (a quiet job watched across a takeover from its cursor)."},
	"BudgetTrims":        {"budget_trims", "Times the retained-bytes budget refused a session more and its job logs were trimmed."},
	"CaughtUpRetries":    {"caught_up_retries", "Resumes refused with nothing to replay (TS SDK) and retried from one event earlier."},
	"MalformedFrames":    {"malformed_frames", "Upstream frames dropped as malformed (undecodable envelope or payload, wrong session_id)."},
	"OversizeFrames":     {"oversize_frames", "Upstream frames over the frame size cap (the transport is dropped and resumed)."},
	"BinaryFrames":       {"binary_frames", "Upstream binary frames ignored."},
	"UnknownTypes":       {"unknown_types", "Upstream frames of a message type ARCP 1.1 does not define, ignored."},
	"ProtocolViolations": {"protocol_violations", "Upstream frames of a known type the runtime must not send at that point (ignored), and out-of-order accepts."},
	"DuplicateEvents":    {"duplicate_events", "Upstream sequenced frames with an event_seq already seen, dropped."},
	"SequenceGaps":       {"sequence_gaps", "Upstream event_seq jumps (the transport is dropped and resumed)."},
	"ControlDrops":       {"control_drops", "The gateway's own control frames (pongs, orphan cancels) dropped at the queue cap."},
	"Reconnects":         {"reconnects", "Upstream transport reconnect attempts."},
	"Resumes":            {"resumes", "Successful upstream session resumes."},
	"ResumeFailures":     {"resume_failures", "Upstream sessions lost because resume failed."},
	"HeartbeatLost":      {"heartbeat_lost", "Upstream transports dropped for missing heartbeats."},
	"FIFOStalls":         {"fifo_stalls", "Upstream transports dropped because the runtime left a tombstoned submit unanswered past its TTL."},
	"TombstonesInserted": {"tombstones_inserted", "Tombstones recorded for requests whose callers gave up."},
	"TombstonesExpired":  {"tombstones_expired", "Tombstones expired by TTL."},
	"TombstoneOverflow":  {"tombstone_overflow", "Tombstones evicted at the per-connection cap."},
	"OrphansCancelled":   {"orphans_cancelled", "Jobs nobody waits for any more, cancelled upstream."},
	"SlowConsumers":      {"slow_consumers", "Watchers failed because they fell behind the session's event buffer."},
	"BackPressure":       {"back_pressure", "Times acking upstream was paused because the session's event buffer was filling up."},
}

// snake turns a Go field name into a metric name part: FIFOStalls →
// fifo_stalls, LateAnswers → late_answers.
func snake(s string) string {
	var b strings.Builder
	r := []rune(s)
	for i, c := range r {
		if unicode.IsUpper(c) && i > 0 && (unicode.IsLower(r[i-1]) || i+1 < len(r) && unicode.IsLower(r[i+1])) {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToLower(c))
	}
	return b.String()
}

var atomicUint64 = reflect.TypeFor[atomic.Uint64]()

// counterFields lists the exported metrics of upstream.Counters: one per
// atomic.Uint64 field, in declaration order.
func counterFields() []struct {
	field  string
	index  int
	metric counterMetric
} {
	t := reflect.TypeFor[upstream.Counters]()
	var out []struct {
		field  string
		index  int
		metric counterMetric
	}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() || f.Type != atomicUint64 {
			continue
		}
		m, ok := counterMetrics[f.Name]
		if !ok {
			m = counterMetric{snake(f.Name), "upstream.Counters." + f.Name + " (not yet documented)."}
		}
		out = append(out, struct {
			field  string
			index  int
			metric counterMetric
		}{f.Name, i, m})
	}
	return out
}

// countersCollector exports every upstream counter of every runtime, read
// at scrape time: the hot path pays one atomic add per event, nothing more.
type countersCollector struct {
	descs    []*prometheus.Desc
	runtimes []string
	values   [][]*atomic.Uint64 // [runtime][field]
}

func newCountersCollector(runtimes []string, counters map[string]*upstream.Counters) *countersCollector {
	c := &countersCollector{runtimes: runtimes}
	fields := counterFields()
	for _, f := range fields {
		c.descs = append(c.descs, prometheus.NewDesc("sessiongate_upstream_"+f.metric.name+"_total", f.metric.help, []string{"runtime"}, nil))
	}
	for _, rt := range runtimes {
		v := reflect.ValueOf(counters[rt]).Elem()
		row := make([]*atomic.Uint64, len(fields))
		for i, f := range fields {
			row[i] = v.Field(f.index).Addr().Interface().(*atomic.Uint64)
		}
		c.values = append(c.values, row)
	}
	return c
}

func (c *countersCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

func (c *countersCollector) Collect(ch chan<- prometheus.Metric) {
	for r, row := range c.values {
		for i, v := range row {
			ch <- prometheus.MustNewConstMetric(c.descs[i], prometheus.CounterValue, float64(v.Load()), c.runtimes[r])
		}
	}
}

// budgetCollector exports the budgets: what is held, the caps, and the
// refusals.
type budgetCollector struct {
	budgets        []*budget.Budget
	inUse, limit   *prometheus.Desc
	refused, users *prometheus.Desc
}

func newBudgetCollector(bs ...*budget.Budget) *budgetCollector {
	return &budgetCollector{
		budgets: bs,
		inUse:   prometheus.NewDesc("sessiongate_budget_in_use", "Units of a budget held by all callers (sessions, live jobs, retained bytes).", []string{"budget"}, nil),
		limit:   prometheus.NewDesc("sessiongate_budget_limit", "A budget's cap, gateway-wide or per caller (0 = none).", []string{"budget", "scope"}, nil),
		refused: prometheus.NewDesc("sessiongate_budget_refused_total", "Reservations refused with RESOURCE_EXHAUSTED, by the cap that refused them.", []string{"budget", "scope"}, nil),
		users:   prometheus.NewDesc("sessiongate_budget_callers", "Callers holding some of a budget.", []string{"budget"}, nil),
	}
}

func (c *budgetCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.inUse
	ch <- c.limit
	ch <- c.refused
	ch <- c.users
}

func (c *budgetCollector) Collect(ch chan<- prometheus.Metric) {
	for _, b := range c.budgets {
		st := b.Stats()
		total, per := b.Limits()
		ch <- prometheus.MustNewConstMetric(c.inUse, prometheus.GaugeValue, float64(st.InUse), b.Name())
		ch <- prometheus.MustNewConstMetric(c.users, prometheus.GaugeValue, float64(st.Callers), b.Name())
		ch <- prometheus.MustNewConstMetric(c.limit, prometheus.GaugeValue, float64(total), b.Name(), string(budget.ScopeGateway))
		ch <- prometheus.MustNewConstMetric(c.limit, prometheus.GaugeValue, float64(per), b.Name(), string(budget.ScopeCaller))
		ch <- prometheus.MustNewConstMetric(c.refused, prometheus.CounterValue, float64(st.RefusedGateway), b.Name(), string(budget.ScopeGateway))
		ch <- prometheus.MustNewConstMetric(c.refused, prometheus.CounterValue, float64(st.RefusedCaller), b.Name(), string(budget.ScopeCaller))
	}
}

// registerGatewayMetrics exposes the session table, the budgets and the
// upstream counters of every runtime.
func registerGatewayMetrics(reg prometheus.Registerer, table *session.Table[*upstream.Conn], runtimes []string,
	counters map[string]*upstream.Counters, budgets ...*budget.Budget) error {
	collectors := []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "sessiongate_sessions", Help: "Sessions in the session table.",
		}, func() float64 { return float64(table.Len()) }),
		newCountersCollector(runtimes, counters),
		newBudgetCollector(append([]*budget.Budget{table.Sessions()}, budgets...)...),
	}
	for _, col := range collectors {
		if err := reg.Register(col); err != nil {
			return fmt.Errorf("gateway: register metrics: %w", err)
		}
	}
	return nil
}
