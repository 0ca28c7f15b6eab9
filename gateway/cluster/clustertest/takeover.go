package clustertest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Metric sums every series of the metric name (any labels) whose labels
// contain each of match (e.g. `result="ok"`) on replica i's /metrics.
func (c *Cluster) Metric(ctx context.Context, i int, name string, match ...string) (float64, error) {
	m, err := c.Metrics(ctx, i)
	if err != nil {
		return 0, err
	}
	return m.Sum(name, match...), nil
}

// Scrape is one read of a replica's /metrics.
type Scrape string

// Metrics reads replica i's /metrics once (several sums from one scrape
// are consistent with each other).
func (c *Cluster) Metrics(ctx context.Context, i int) (Scrape, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+c.Replicas[i].Admin+"/metrics", nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return Scrape(b), err
}

// Sum sums every series of the metric name whose labels contain each of
// match.
func (s Scrape) Sum(name string, match ...string) float64 {
	var sum float64
	for _, l := range strings.Split(string(s), "\n") {
		rest, ok := strings.CutPrefix(l, name)
		if !ok || (rest != "" && rest[0] != ' ' && rest[0] != '{') {
			continue
		}
		labels, value := "", rest
		if strings.HasPrefix(rest, "{") {
			end := strings.Index(rest, "}")
			if end < 0 {
				continue
			}
			labels, value = rest[:end+1], rest[end+1:]
		}
		if !allIn(labels, match) {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			continue
		}
		sum += v
	}
	return sum
}

func allIn(s string, subs []string) bool {
	for _, m := range subs {
		if !strings.Contains(s, m) {
			return false
		}
	}
	return true
}

// TakeoverFigures is what MeasureTakeover measured, every duration from the
// SIGKILL.
type TakeoverFigures struct {
	Orphans  int           // the killed replica's sessions
	LeaseTTL time.Duration // the cluster's --lease-ttl
	// Claimed: every orphan claimed in the directory by a survivor (the
	// survivors' takeovers done plus those claimed and resuming, from their
	// /metrics).
	Claimed time.Duration
	// Resumed: every orphan also resumed upstream by its new owner.
	Resumed time.Duration
	// CallerFelt: the last of the sample's probe calls (each retried until
	// it is answered) answered.
	CallerFelt time.Duration
	Sample     int // sessions probed by calls
	ProbeCalls int // calls the probes made, failed ones included
	// PerSurvivor: each survivor's resumes and their rate (resumed ÷ the
	// time from its first claim to its last resume): the runtime's and
	// the survivor's resume cost.
	PerSurvivor []SurvivorFigures
	// RedisCommands: commands Redis processed from the SIGKILL to the last
	// resume (INFO total_commands_processed; commands inside scripts
	// count), the probes' calls included.
	RedisCommands int64
}

// SurvivorFigures is one survivor's part of a takeover.
type SurvivorFigures struct {
	Instance         string
	Resumed          int
	ResumesPerSecond float64
	Jumps            int // resumed at once for a call, ahead of the queue
}

// PerOrphan is RedisCommands per orphan.
func (f TakeoverFigures) PerOrphan() float64 {
	if f.Orphans == 0 {
		return 0
	}
	return float64(f.RedisCommands) / float64(f.Orphans)
}

func (f TakeoverFigures) String() string {
	var per []string
	for _, s := range f.PerSurvivor {
		per = append(per, fmt.Sprintf("%s %d at %.0f/s (%d jumped the queue)", s.Instance, s.Resumed, s.ResumesPerSecond, s.Jumps))
	}
	return fmt.Sprintf("%d orphans, lease TTL %v: all claimed %.2fs, all resumed %.2fs, caller-felt %.2fs (last of %d probed sessions answered; %d probe calls); resumes per survivor: %s; Redis commands %d (%.1f per orphan, probes included)",
		f.Orphans, f.LeaseTTL, f.Claimed.Seconds(), f.Resumed.Seconds(), f.CallerFelt.Seconds(), f.Sample, f.ProbeCalls,
		strings.Join(per, ", "), f.RedisCommands, f.PerOrphan())
}

// MeasureTakeover SIGKILLs replica victim, whose sessions (the orphans,
// counted from its owner index at the kill) are taken over, and
// measures how the others take them over (TakeoverFigures): it polls the
// survivors' /metrics every 20 ms (no Redis command), and from the kill on
// probes each session of sample with call (which must succeed only when
// the session is usable: a RunJob) until it answers, a pause of 50 ms
// after each failure. It returns when every orphan is resumed and every
// probe answered, or fails when ctx ends first.
func (c *Cluster) MeasureTakeover(ctx context.Context, victim int, sample []string, call func(ctx context.Context, sid string) error) (TakeoverFigures, error) {
	f := TakeoverFigures{LeaseTTL: c.LeaseTTL, Sample: len(sample)}
	var survivors []int
	for i := range c.Replicas {
		if i != victim && c.Replicas[i].Running() {
			survivors = append(survivors, i)
		}
	}
	type counts struct{ ok, pending, jumps float64 }
	read := func(i int) (counts, error) {
		m, err := c.Metrics(ctx, i)
		if err != nil {
			return counts{}, err
		}
		// A dead owner's sessions only: the rebalancer's hand-offs
		// (reason "handoff") go on beside them.
		return counts{ok: m.Sum("sessiongate_cluster_takeovers_total", `reason="sweep"`, `result="ok"`) +
			m.Sum("sessiongate_cluster_takeovers_total", `reason="call"`, `result="ok"`),
			pending: m.Sum("sessiongate_cluster_resumes_pending", `reason="sweep"`),
			jumps:   m.Sum("sessiongate_cluster_resume_jumps_total")}, nil
	}
	base := make([]counts, len(survivors))
	for j, i := range survivors {
		k, err := read(i)
		if err != nil {
			return f, err
		}
		base[j] = k
	}
	before, err := c.RedisInfoInt(ctx, "total_commands_processed")
	if err != nil {
		return f, err
	}
	c.Kill(victim)
	killed := time.Now()
	// The orphans are the sessions the victim's owner index names now
	// (nobody may claim them before its lease has been gone a TTL); the
	// sessions it released before (the rebalancer's) are adopted as
	// hand-offs, not counted here.
	idx, err := c.RedisCommand(ctx, "SCARD", "sessiongate:owned:"+c.Replicas[victim].Instance)
	if err != nil {
		return f, err
	}
	held, err := strconv.Atoi(strings.TrimPrefix(idx, ":"))
	if err != nil {
		return f, fmt.Errorf("clustertest: SCARD of the owner index: %q", idx)
	}
	f.Orphans = held

	var mu sync.Mutex
	var wg sync.WaitGroup
	var last time.Duration
	calls := 0
	for _, sid := range sample {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				err := call(ctx, sid)
				mu.Lock()
				calls++
				if err == nil {
					last = max(last, time.Since(killed))
				}
				mu.Unlock()
				if err == nil {
					return
				}
				t := time.NewTimer(50 * time.Millisecond)
				select {
				case <-ctx.Done():
					t.Stop()
				case <-t.C:
				}
			}
		}()
	}

	n := float64(held)
	first := make([]time.Duration, len(survivors)) // first claim seen
	done := make([]time.Duration, len(survivors))  // last resume seen
	lastOK := make([]float64, len(survivors))
	final := make([]counts, len(survivors))
	for f.Resumed == 0 {
		if ctx.Err() != nil {
			wg.Wait()
			return f, fmt.Errorf("clustertest: takeover not complete (claimed %v, resumed %v): %w", f.Claimed, f.Resumed, ctx.Err())
		}
		at := time.Since(killed)
		var ok, claimed float64
		for j, i := range survivors {
			k, err := read(i)
			if err != nil {
				continue // scraped again at the next poll
			}
			dOK := k.ok - base[j].ok
			if first[j] == 0 && dOK+k.pending > 0 {
				first[j] = at
			}
			if dOK > lastOK[j] {
				lastOK[j], done[j] = dOK, at
			}
			ok += dOK
			claimed += dOK + k.pending
			final[j] = k
		}
		if f.Claimed == 0 && claimed >= n {
			f.Claimed = at
		}
		if ok >= n {
			f.Resumed = at
			if f.Claimed == 0 {
				f.Claimed = at
			}
			break
		}
		t := time.NewTimer(20 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
	}
	after, err := c.RedisInfoInt(ctx, "total_commands_processed")
	if err != nil {
		return f, err
	}
	f.RedisCommands = after - before - 2 // less the SCARD and this INFO
	wg.Wait()
	if ctx.Err() != nil {
		return f, fmt.Errorf("clustertest: probes not answered: %w", ctx.Err())
	}
	f.CallerFelt, f.ProbeCalls = last, calls
	for j, i := range survivors {
		s := SurvivorFigures{Instance: c.Replicas[i].Instance, Resumed: int(lastOK[j])}
		s.Jumps = int(final[j].jumps - base[j].jumps)
		if d := done[j] - first[j]; s.Resumed > 0 && d > 0 {
			s.ResumesPerSecond = float64(s.Resumed) / d.Seconds()
		}
		f.PerSurvivor = append(f.PerSurvivor, s)
	}
	slices.SortFunc(f.PerSurvivor, func(a, b SurvivorFigures) int { return strings.Compare(a.Instance, b.Instance) })
	return f, nil
}
