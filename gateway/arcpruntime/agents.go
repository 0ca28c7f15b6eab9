package arcpruntime

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/sessiongate/sessiongate/gateway/arcp"
)

// jobIO is what a running agent may do besides returning.
type jobIO struct {
	// emit emits one job.event. It fails once the job may no longer emit.
	emit func(kind string, body any) error
	// pace waits while the attached client lags far behind (more than half
	// of MaxBufferedEvents or MaxBufferedBytes unsent), so a fast agent does
	// not outrun a live, reading client into a slow-consumer drop. It does
	// not wait when no transport is attached or the runtime is stalled, nor
	// for a client that made no progress for paceGiveUp.
	pace func(ctx context.Context) error
}

// runFunc runs a prepared job. It must return promptly when ctx ends.
type runFunc func(ctx context.Context, io jobIO) (json.RawMessage, error)

// agent is a demo agent. prepare validates the input (an error becomes
// INVALID_REQUEST) and returns the job body.
type agent struct {
	name    string
	prepare func(input json.RawMessage, progress bool) (runFunc, error)
}

// agentVersion is the one version every demo agent has.
const agentVersion = "1.0.0"

// Limits of the demo agents' inputs.
const (
	maxSleepMS        = 3_600_000
	maxStreamCount    = 100_000
	maxStreamInterval = 60_000
	progressEvery     = 100 * time.Millisecond
)

// defaultAgents are the demo agents every runtime has.
var defaultAgents = []agent{
	{name: "echo", prepare: prepareEcho},
	{name: "sleep", prepare: prepareSleep},
	{name: "stream", prepare: prepareStream},
	{name: "fail", prepare: prepareFail},
}

// agentList is the welcome's agent list.
func agentList(agents []agent) []arcp.Agent {
	out := make([]arcp.Agent, len(agents))
	for i, a := range agents {
		out[i] = arcp.Agent{Name: a.name, Versions: []string{agentVersion}, Default: agentVersion}
	}
	return out
}

// lookupAgent resolves "name" or "name@version" among agents. code is
// non-empty when the agent or version does not exist.
func lookupAgent(agents []agent, spec string) (*agent, string, string) {
	name, version, hasVersion := strings.Cut(spec, "@")
	for i := range agents {
		if agents[i].name != name {
			continue
		}
		if hasVersion && version != agentVersion {
			return nil, "", arcp.CodeAgentVersionNotAvailable
		}
		return &agents[i], agentVersion, ""
	}
	return nil, "", arcp.CodeAgentNotAvailable
}

// echo: the result is the input, any JSON value.
func prepareEcho(input json.RawMessage, _ bool) (runFunc, error) {
	return func(context.Context, jobIO) (json.RawMessage, error) { return input, nil }, nil
}

// sleep: {"ms": N}; progress events about every 100ms (at least one at the
// start and one at the end), then {"slept_ms": N}.
func prepareSleep(input json.RawMessage, progress bool) (runFunc, error) {
	fields, err := objectFields(input)
	if err != nil {
		return nil, err
	}
	ms, err := intField(fields, "ms", true, 0, maxSleepMS)
	if err != nil {
		return nil, err
	}
	kind := arcp.KindProgress
	if !progress {
		kind = arcp.KindStatus // progress was not negotiated
	}
	return func(ctx context.Context, io jobIO) (json.RawMessage, error) {
		total := time.Duration(ms) * time.Millisecond
		report := func(elapsed time.Duration) error {
			body := map[string]any{"elapsed_ms": min(elapsed, total).Milliseconds(), "total_ms": ms}
			if kind == arcp.KindStatus {
				body["phase"] = "sleeping"
			}
			return io.emit(kind, body)
		}
		start := time.Now()
		if err := report(0); err != nil {
			return nil, err
		}
		done := time.NewTimer(total)
		defer done.Stop()
		tick := time.NewTicker(progressEvery)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-tick.C:
				if time.Since(start) < total {
					if err := report(time.Since(start)); err != nil {
						return nil, err
					}
				}
			case <-done.C:
				if err := report(total); err != nil {
					return nil, err
				}
				return json.Marshal(map[string]int64{"slept_ms": ms})
			}
		}
	}, nil
}

// stream: {"count": N, "interval_ms": M}; N log events M ms apart, then
// {"count": N}.
func prepareStream(input json.RawMessage, _ bool) (runFunc, error) {
	fields, err := objectFields(input)
	if err != nil {
		return nil, err
	}
	count, err := intField(fields, "count", true, 0, maxStreamCount)
	if err != nil {
		return nil, err
	}
	interval, err := intField(fields, "interval_ms", false, 0, maxStreamInterval)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, io jobIO) (json.RawMessage, error) {
		var timer *time.Timer
		if interval > 0 {
			timer = time.NewTimer(time.Hour)
			defer timer.Stop()
		}
		for i := int64(0); i < count; i++ {
			if i > 0 && timer != nil {
				timer.Reset(time.Duration(interval) * time.Millisecond)
				select {
				case <-ctx.Done():
					return nil, ctx.Err()
				case <-timer.C:
				}
			} else if err := ctx.Err(); err != nil {
				return nil, err
			}
			if err := io.pace(ctx); err != nil {
				return nil, err
			}
			msg := "line " + strconv.FormatInt(i+1, 10) + " of " + strconv.FormatInt(count, 10)
			if err := io.emit(arcp.KindLog, map[string]any{"i": i, "message": msg}); err != nil {
				return nil, err
			}
		}
		return json.Marshal(map[string]int64{"count": count})
	}, nil
}

// fail: {"code", "message", "retryable"?, "details"?}; ends in job.error
// with the code normalized.
func prepareFail(input json.RawMessage, _ bool) (runFunc, error) {
	var in struct {
		Code      string          `json:"code"`
		Message   string          `json:"message"`
		Retryable bool            `json:"retryable"`
		Details   json.RawMessage `json:"details"`
	}
	if !bytes.Equal(bytes.TrimSpace(input), []byte("null")) {
		if _, err := objectFields(input); err != nil {
			return nil, err
		}
		if err := json.Unmarshal(input, &in); err != nil {
			return nil, errors.New("code and message must be strings")
		}
	}
	if len(bytes.TrimSpace(in.Details)) > 0 && !bytes.HasPrefix(bytes.TrimSpace(in.Details), []byte("{")) {
		return nil, errors.New("details must be an object")
	}
	if in.Message == "" {
		in.Message = "failed on request"
	}
	e := &agentError{code: arcp.NormalizeCode(in.Code), message: truncate(in.Message, 4096), retryable: in.Retryable, details: in.Details}
	return func(context.Context, jobIO) (json.RawMessage, error) { return nil, e }, nil
}

// objectFields decodes a JSON object into its raw fields.
func objectFields(input json.RawMessage) (map[string]json.RawMessage, error) {
	var fields map[string]json.RawMessage
	if !bytes.HasPrefix(bytes.TrimSpace(input), []byte("{")) || json.Unmarshal(input, &fields) != nil {
		return nil, errors.New("input must be a JSON object")
	}
	return fields, nil
}

// intField reads an integer field within [lo, hi].
func intField(fields map[string]json.RawMessage, name string, required bool, lo, hi int64) (int64, error) {
	raw, ok := fields[name]
	if !ok || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		if required {
			return 0, fmt.Errorf("%s is required", name)
		}
		return 0, nil
	}
	var f float64
	if json.Unmarshal(raw, &f) != nil || f != math.Trunc(f) || f < float64(lo) || f > float64(hi) {
		return 0, fmt.Errorf("%s must be an integer in [%d, %d]", name, lo, hi)
	}
	return int64(f), nil
}
