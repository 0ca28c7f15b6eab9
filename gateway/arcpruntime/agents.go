package arcpruntime

import (
	"bytes"
	"context"
	"encoding/base64"
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
	// streamed records that the agent streamed its result as result_chunk
	// events; the job then ends with job.result{result_id, result_size,
	// summary} (the agent returns no result).
	streamed func(streamedResult)
}

// runFunc runs a prepared job. It must return promptly when ctx ends.
type runFunc func(ctx context.Context, io jobIO) (json.RawMessage, error)

// agent is a demo agent. prepare validates the input (an error becomes
// INVALID_REQUEST) and returns the job body.
type agent struct {
	name    string
	prepare func(input json.RawMessage, env agentEnv) (runFunc, error)
}

// agentEnv is what an agent may know of its session and runtime.
type agentEnv struct {
	progress    bool // progress was negotiated
	resultChunk bool // result_chunk was negotiated
	dialect     *Dialect
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
	{name: "chunked", prepare: prepareChunked},
	{name: "nest", prepare: prepareNest},
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
func prepareEcho(input json.RawMessage, _ agentEnv) (runFunc, error) {
	return func(context.Context, jobIO) (json.RawMessage, error) { return input, nil }, nil
}

// sleep: {"ms": N}; progress events about every 100ms (at least one at the
// start and one at the end), then {"slept_ms": N}.
func prepareSleep(input json.RawMessage, env agentEnv) (runFunc, error) {
	fields, err := objectFields(input)
	if err != nil {
		return nil, err
	}
	ms, err := intField(fields, "ms", true, 0, maxSleepMS)
	if err != nil {
		return nil, err
	}
	kind := arcp.KindProgress
	if !env.progress {
		kind = arcp.KindStatus // progress was not negotiated
	}
	return func(ctx context.Context, io jobIO) (json.RawMessage, error) {
		total := time.Duration(ms) * time.Millisecond
		report := func(elapsed time.Duration) error {
			el := min(elapsed, total).Milliseconds()
			// §8.2.1's body, plus the fields earlier versions sent.
			body := map[string]any{"current": el, "total": ms, "units": "ms", "elapsed_ms": el, "total_ms": ms}
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
func prepareStream(input json.RawMessage, _ agentEnv) (runFunc, error) {
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
func prepareFail(input json.RawMessage, _ agentEnv) (runFunc, error) {
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

// maxNestDepth bounds the nest agent's depth: below encoding/json's own
// limit (10 000), so that the runtime's job.result still decodes.
const maxNestDepth = 5000

// nest: {"depth": 0..5000, "as": "array" (default) or "object"}; the result
// is 1 nested depth arrays ([[1]] at depth 2) or objects ({"a":{"a":1}}),
// for testing what callers receive of a result nested deeper than a
// gateway's or client's bound (the input stays shallow).
func prepareNest(input json.RawMessage, _ agentEnv) (runFunc, error) {
	fields, err := objectFields(input)
	if err != nil {
		return nil, err
	}
	depth, err := intField(fields, "depth", true, 0, maxNestDepth)
	if err != nil {
		return nil, err
	}
	open, close := "[", "]"
	if raw, ok := fields["as"]; ok {
		var as string
		if json.Unmarshal(raw, &as) != nil || (as != "array" && as != "object") {
			return nil, errors.New(`as must be "array" or "object"`)
		}
		if as == "object" {
			open, close = `{"a":`, "}"
		}
	}
	n := int(depth)
	result := json.RawMessage(strings.Repeat(open, n) + "1" + strings.Repeat(close, n))
	return func(context.Context, jobIO) (json.RawMessage, error) { return result, nil }, nil
}

// Limits of the chunked agent.
const (
	maxChunkedSize      = 32 << 20
	maxChunkBytes       = 1 << 20
	defaultChunkedBytes = 64 << 10
)

// ChunkedByte is byte i of every result the chunked agent produces.
func ChunkedByte(i int64) byte { return 'a' + byte(i%26) }

// resultChunk is the body of a job.event of kind result_chunk (§8.4).
type resultChunk struct {
	ResultID string `json:"result_id"`
	ChunkSeq int64  `json:"chunk_seq"`
	Data     string `json:"data"`
	Encoding string `json:"encoding"`
	More     bool   `json:"more"`
}

// chunked: {"size": N, "chunk_bytes": M, "encoding": "utf8"|"base64"}; a
// result of N bytes (ChunkedByte), streamed as result_chunk events of at
// most M bytes each when result_chunk is negotiated (or the dialect streams
// anyway), else inline as one string in that encoding, or refused
// (Dialect.Stream).
func prepareChunked(input json.RawMessage, env agentEnv) (runFunc, error) {
	fields, err := objectFields(input)
	if err != nil {
		return nil, err
	}
	size, err := intField(fields, "size", true, 0, maxChunkedSize)
	if err != nil {
		return nil, err
	}
	chunk, err := intField(fields, "chunk_bytes", false, 1, maxChunkBytes)
	if err != nil {
		return nil, err
	}
	if chunk == 0 {
		chunk = defaultChunkedBytes
	}
	encoding := "utf8"
	if raw, ok := fields["encoding"]; ok && !bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		if json.Unmarshal(raw, &encoding) != nil || encoding != "utf8" && encoding != "base64" {
			return nil, errors.New(`encoding must be "utf8" or "base64"`)
		}
	}
	encode := func(from, to int64) string {
		b := make([]byte, to-from)
		for i := range b {
			b[i] = ChunkedByte(from + int64(i))
		}
		if encoding == "base64" {
			return base64.StdEncoding.EncodeToString(b)
		}
		return string(b)
	}
	d := env.dialect
	if !env.resultChunk && d.Stream != StreamAnyway {
		if d.Stream == StreamRefuse {
			e := &agentError{code: arcp.CodeInvalidRequest, message: "cannot emit result_chunk event without negotiated 'result_chunk' feature"}
			return func(context.Context, jobIO) (json.RawMessage, error) { return nil, e }, nil
		}
		return func(context.Context, jobIO) (json.RawMessage, error) {
			return json.Marshal(encode(0, size))
		}, nil
	}
	finalEmpty := d.ChunkFinalEmpty
	return func(ctx context.Context, io jobIO) (json.RawMessage, error) {
		id := "res_" + randomHex(16)
		var seq int64
		send := func(from, to int64, more bool) error {
			if err := io.pace(ctx); err != nil {
				return err
			}
			if err := io.emit(arcp.KindResultChunk, resultChunk{ResultID: id, ChunkSeq: seq, Data: encode(from, to), Encoding: encoding, More: more}); err != nil {
				return err
			}
			seq++
			return nil
		}
		for from := int64(0); from < size; from += chunk {
			to := min(from+chunk, size)
			if err := send(from, to, to < size || finalEmpty); err != nil {
				return nil, err
			}
		}
		if size == 0 || finalEmpty {
			if err := send(0, 0, false); err != nil {
				return nil, err
			}
		}
		sr := streamedResult{ResultID: id, ResultSize: size}
		if !finalEmpty {
			sr.Summary = strconv.FormatInt(size, 10) + " bytes in " + strconv.FormatInt(seq, 10) + " chunks"
		}
		io.streamed(sr)
		return nil, nil
	}, nil
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
