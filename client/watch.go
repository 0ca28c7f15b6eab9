package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"iter"
	"math/rand/v2"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	gatewayv1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
)

// WatchItem is one item of a watched job: exactly one of Event (an
// intermediate event), Result (the job's successful end) and Error (its
// unsuccessful end) is set; the last item of a watch is a Result or an
// Error.
type WatchItem struct {
	// EventSeq is the item's upstream event_seq, increasing within a watch.
	EventSeq uint64
	Event    *JobEvent
	Result   *JobResult
	Error    *JobError
	// Extensions are the vendor extensions of the item's envelope.
	Extensions map[string]any
	// Proto is the item as the gateway sent it.
	Proto *gatewayv1.WatchJobResponse
}

// JobEvent is an intermediate event of a watched job.
type JobEvent struct {
	Kind string // log, progress, status, … or a vendor kind "x-vendor.…"
	TS   time.Time
	// Body is the event's body as encoding/json decodes into an any (with
	// json.Number numbers when the runtime's JSON came raw).
	Body any
	// Progress is set for kind "progress".
	Progress *Progress
	// ResultChunk is set for kind "result_chunk"; the data is in Body.
	ResultChunk *ResultChunk
}

// Progress is a typed progress report; Total is nil when indeterminate.
type Progress struct {
	Current float64
	Total   *float64
	Units   string
	Message string
}

// ResultChunk is the metadata of one chunk of a streamed result.
type ResultChunk struct {
	ResultID string
	ChunkSeq uint64
	Encoding string // "utf8" or "base64"
	More     bool
}

// JobResult is a watched job's successful end.
type JobResult struct {
	Result     any
	Summary    string
	ResultID   string
	ResultSize int64

	value *structpb.Value
	raw   []byte
}

// Decode decodes the result into out (a pointer), as encoding/json would.
func (r *JobResult) Decode(out any) error { return decodeRawOrValue(r.raw, r.value, out) }

// JobError is a watched job's unsuccessful end. It is an error.
type JobError struct {
	FinalStatus string // "error", "cancelled" or "timed_out"
	Code        string // the ARCP error code, e.g. "CANCELLED"
	Message     string
	Retryable   bool
	Details     any
}

// Error reads e.g. `sessiongate: job ended cancelled: CANCELLED: caller asked`.
func (e *JobError) Error() string {
	return "sessiongate: job ended " + e.FinalStatus + ": " + e.Code + ": " + e.Message
}

func watchItem(m *gatewayv1.WatchJobResponse) *WatchItem {
	it := &WatchItem{EventSeq: m.GetEventSeq(), Extensions: extensionsMap(m.GetExtensions()), Proto: m}
	switch {
	case m.GetEvent() != nil:
		e := m.GetEvent()
		ev := &JobEvent{Kind: e.GetKind(), Body: rawOrValue(e.GetRawBody(), e.GetBody())}
		if e.GetTs() != nil {
			ev.TS = e.GetTs().AsTime()
		}
		if p := e.GetProgress(); p != nil {
			ev.Progress = &Progress{Current: p.GetCurrent(), Units: p.GetUnits(), Message: p.GetMessage()}
			if p.Total != nil {
				t := p.GetTotal()
				ev.Progress.Total = &t
			}
		}
		if c := e.GetResultChunk(); c != nil {
			ev.ResultChunk = &ResultChunk{ResultID: c.GetResultId(), ChunkSeq: c.GetChunkSeq(), Encoding: c.GetEncoding(), More: c.GetMore()}
		}
		it.Event = ev
	case m.GetResult() != nil:
		r := m.GetResult()
		it.Result = &JobResult{
			Result: rawOrValue(r.GetRawResult(), r.GetResult()), Summary: r.GetSummary(),
			ResultID: r.GetResultId(), ResultSize: r.GetResultSize(), value: r.GetResult(), raw: r.GetRawResult(),
		}
	case m.GetError() != nil:
		e := m.GetError()
		it.Error = &JobError{
			FinalStatus: e.GetFinalStatus(), Code: e.GetCode(), Message: e.GetMessage(), Retryable: e.GetRetryable(),
			Details: rawOrValue(e.GetRawDetails(), e.GetDetails()),
		}
	}
	return it
}

// WatchOption sets an optional behaviour of Watch.
type WatchOption func(*watchOptions)

type watchOptions struct {
	from   uint64
	policy *ResumePolicy
}

// FromEventSeq delivers only items with event_seq above seq (0: from the
// start).
func FromEventSeq(seq uint64) WatchOption {
	return func(o *watchOptions) { o.from = seq }
}

// WithoutResume turns off resuming: a cut stream ends the watch with its
// error.
func WithoutResume() WatchOption {
	return func(o *watchOptions) { o.policy = nil }
}

// WithResumePolicy tunes resuming (zero fields take the defaults).
func WithResumePolicy(p ResumePolicy) WatchOption {
	return func(o *watchOptions) { o.policy = &p }
}

// Watch streams a job's items in event_seq order: events, then its result
// or error. The stream starts when the loop does and ends with it:
//
//	for item, err := range s.Watch(ctx, job.ID) {
//		if err != nil { … }
//	}
//
// A watch resumes itself: when the stream is cut by a hand-off, an
// unreachable owner, a draining gateway or a dropped connection
// (UNAVAILABLE; see Resumable), it is re-opened from the last event_seq
// delivered, with backoff, within ctx's deadline, so the loop sees every
// item once, in order. WithoutResume turns that off. A failed watch yields
// one (nil, error) and ends.
func (s *Session) Watch(ctx context.Context, jobID string, opts ...WatchOption) iter.Seq2[*WatchItem, error] {
	o := watchOptions{policy: &ResumePolicy{}}
	for _, opt := range opts {
		opt(&o)
	}
	return func(yield func(*WatchItem, error) bool) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel() // ends the stream when the loop stops early
		deadline, _ := ctx.Deadline()
		r := newResumer(o.from, o.policy, deadline, rand.Float64)
		for {
			err := s.watchOnce(ctx, jobID, r, yield)
			if err == nil {
				return
			}
			if ctx.Err() != nil {
				yield(nil, err)
				return
			}
			delay, ok := r.cut(err, time.Now())
			if !ok {
				yield(nil, err)
				return
			}
			t := time.NewTimer(delay)
			select {
			case <-ctx.Done():
				t.Stop()
				yield(nil, err)
				return
			case <-t.C:
			}
		}
	}
}

// watchOnce runs one WatchJob stream from r's cursor: nil when the watch is
// over (terminal item, end of stream, or the loop stopped), else the
// stream's error.
func (s *Session) watchOnce(ctx context.Context, jobID string, r *resumer, yield func(*WatchItem, error) bool) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := s.c.api.WatchJob(s.c.callContext(ctx, s.id, true),
		&gatewayv1.WatchJobRequest{SessionId: s.id, JobId: jobID, FromEventSeq: r.cursor})
	if err != nil {
		return wrapError(err)
	}
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return wrapError(err)
		}
		if !r.deliver(m.GetEventSeq(), m.GetEvent() == nil) {
			continue
		}
		if !yield(watchItem(m), nil) || r.done {
			return nil
		}
	}
}

// rawOrValue is a Value as encoding/json decodes into an any, or the
// runtime's raw JSON (sent when it has no Value form) decoded with
// json.Number numbers.
func rawOrValue(raw []byte, v *structpb.Value) any {
	if len(raw) == 0 {
		return v.AsInterface()
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var out any
	if err := d.Decode(&out); err != nil {
		return string(raw)
	}
	return out
}

func decodeRawOrValue(raw []byte, v *structpb.Value, out any) error {
	if len(raw) > 0 {
		return json.Unmarshal(raw, out)
	}
	return decodeValue(v, out)
}
