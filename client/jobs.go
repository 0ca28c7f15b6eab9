package client

import (
	"context"
	"fmt"
	"iter"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	gatewayv1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
)

// This file is the ARCP 1.1 job surface beyond run/submit/watch/cancel:
// ListJobs, SubscribeJob, the extras of a submit and the typed parts of the
// answers.

// spanTraceparent is the W3C traceparent of ctx's OpenTelemetry span, or ""
// when it has no valid one.
func spanTraceparent(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return ""
	}
	return fmt.Sprintf("00-%s-%s-%02x", sc.TraceID(), sc.SpanID(), byte(sc.TraceFlags()))
}

// context sets the explicit traceparent (Traceparent) on ctx's outgoing
// metadata, in place of any the caller set.
func (o *jobOptions) context(ctx context.Context) context.Context {
	if o.traceparent == "" {
		return ctx
	}
	md, ok := metadata.FromOutgoingContext(ctx)
	if !ok {
		md = metadata.MD{}
	}
	md.Set(TraceparentMetadataKey, o.traceparent)
	return metadata.NewOutgoingContext(ctx, md)
}

func leaseProto(l Lease) *gatewayv1.Lease {
	if l == nil {
		return nil
	}
	out := &gatewayv1.Lease{Capabilities: make(map[string]*gatewayv1.LeasePatterns, len(l))}
	for ns, p := range l {
		out.Capabilities[ns] = &gatewayv1.LeasePatterns{Patterns: p}
	}
	return out
}

func constraintsProto(at time.Time) *gatewayv1.LeaseConstraints {
	if at.IsZero() {
		return nil
	}
	return &gatewayv1.LeaseConstraints{ExpiresAt: timestamppb.New(at)}
}

func extensionsProto(ext map[string]any) (map[string]*structpb.Value, error) {
	if len(ext) == 0 {
		return nil, nil
	}
	out := make(map[string]*structpb.Value, len(ext))
	for k, v := range ext {
		pv, err := toValue(v, "extensions["+strconv.Quote(k)+"]")
		if err != nil {
			return nil, err
		}
		out[k] = pv
	}
	return out, nil
}

func extensionsMap(ext map[string]*structpb.Value) map[string]any {
	if len(ext) == 0 {
		return nil
	}
	out := make(map[string]any, len(ext))
	for k, v := range ext {
		out[k] = v.AsInterface()
	}
	return out
}

// LeaseOf returns the lease of a Job from ListJobs or Subscribe as a Lease
// (nil when it has none).
func LeaseOf(l *gatewayv1.Lease) Lease {
	if len(l.GetCapabilities()) == 0 {
		return nil
	}
	out := make(Lease, len(l.GetCapabilities()))
	for ns, p := range l.GetCapabilities() {
		out[ns] = p.GetPatterns()
	}
	return out
}

func grant(agent, traceID string, l *gatewayv1.Lease, c *gatewayv1.LeaseConstraints, budget map[string]float64) Grant {
	g := Grant{Agent: agent, TraceID: traceID, Lease: LeaseOf(l), Budget: budget}
	if at := c.GetExpiresAt(); at != nil {
		g.LeaseExpiresAt = at.AsTime()
	}
	return g
}

// ListOption sets an optional field of ListJobs.
type ListOption func(*gatewayv1.ListJobsRequest)

// PageSize sets how many jobs each page asks for (default 50, at most 1000).
func PageSize(n int32) ListOption {
	return func(r *gatewayv1.ListJobsRequest) { r.PageSize = n }
}

// ListJobs lists the jobs the session's runtime reports for the session, in
// acceptance order, following page tokens as the loop goes on. filter is an
// AIP-160 filter (see ListJobsRequest.filter), e.g.
// `(state = PENDING OR state = RUNNING) AND agent = "echo"`; "" lists all.
// Each page is a call under ctx; a failed call yields one (nil, error) and
// ends the sequence.
func (s *Session) ListJobs(ctx context.Context, filter string, opts ...ListOption) iter.Seq2[*gatewayv1.Job, error] {
	return func(yield func(*gatewayv1.Job, error) bool) {
		req := &gatewayv1.ListJobsRequest{SessionId: s.id, Filter: filter}
		for _, opt := range opts {
			opt(req)
		}
		for {
			resp, err := s.c.api.ListJobs(s.c.callContext(ctx, s.id, true), req)
			if err != nil {
				yield(nil, wrapError(err))
				return
			}
			for _, j := range resp.GetJobs() {
				if !yield(j, nil) {
					return
				}
			}
			if resp.GetNextPageToken() == "" {
				return
			}
			req.PageToken = resp.GetNextPageToken()
		}
	}
}

// SubscribeOption sets an optional field of Subscribe.
type SubscribeOption func(*gatewayv1.SubscribeJobRequest)

// WithHistory replays the job's buffered events with event_seq above from
// (in the submitting session's numbering; 0 = all buffered) before live
// ones.
func WithHistory(from uint64) SubscribeOption {
	return func(r *gatewayv1.SubscribeJobRequest) { r.History, r.FromEventSeq = true, from }
}

// Subscribe attaches the session to a job submitted through another of the
// caller's sessions (ARCP job.subscribe); Watch then works for the job in
// this session, Cancel does not (PERMISSION_DENIED: a subscriber only
// observes).
func (s *Session) Subscribe(ctx context.Context, jobID string, opts ...SubscribeOption) (*gatewayv1.SubscribeJobResponse, error) {
	req := &gatewayv1.SubscribeJobRequest{SessionId: s.id, JobId: jobID}
	for _, opt := range opts {
		opt(req)
	}
	resp, err := s.c.api.SubscribeJob(s.c.callContext(ctx, s.id, true), req)
	if err != nil {
		return nil, wrapError(err)
	}
	return resp, nil
}
