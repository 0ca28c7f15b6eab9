package server

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/sessiongate/sessiongate/gateway/arcp"
	"github.com/sessiongate/sessiongate/gateway/upstream"
	"github.com/sessiongate/sessiongate/gateway/wirecodec"
	sessiongatev1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
)

// This file is the ARCP 1.1 job surface beyond submit/run/cancel/watch:
// ListJobs, SubscribeJob, the submit extras (agent version, lease request
// and constraints, vendor extensions, the caller's trace context) and the
// typed parts of answers (resolved agent, lease, budget, trace id, progress,
// result chunks, extensions).

// gatewayFeatures are the ARCP features the gateway implements, in the
// order it requests them. provisioned_credentials is left out: credentials
// are secrets with a lifecycle (§9.8) that the gateway would have to hold,
// redact and revoke, and it does none of that.
var gatewayFeatures = []string{
	arcp.FeatureHeartbeat, arcp.FeatureAck, arcp.FeatureListJobs, arcp.FeatureSubscribe,
	arcp.FeatureProgress, arcp.FeatureResultChunk, arcp.FeatureAgentVersions,
	arcp.FeatureLeaseExpiresAt, arcp.FeatureCostBudget, arcp.FeatureModelUse,
}

// DefaultFeatures returns the ARCP features the gateway requests upstream
// when neither Config.Features nor OpenSession names any: every feature it
// implements, in the order it requests them. The slice is the caller's.
func DefaultFeatures() []string { return slices.Clone(gatewayFeatures) }

// implementedFeatures keeps the features of fs the gateway implements. The
// result is non-nil, so that an empty result requests none upstream.
func implementedFeatures(fs []string) []string {
	out := make([]string, 0, len(fs))
	for _, f := range fs {
		if slices.Contains(gatewayFeatures, f) && !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out
}

// Trace context.

// traceIDFrom returns the trace id of the caller's W3C traceparent
// metadata, or a fresh random one when there is none or it is malformed
// (W3C Trace Context §4.3: a vendor that cannot parse traceparent starts a
// new trace). fresh says which.
func traceIDFrom(ctx context.Context) (id string, fresh bool) {
	if vals := metadata.ValueFromIncomingContext(ctx, "traceparent"); len(vals) == 1 {
		if id, ok := parseTraceparent(vals[0]); ok {
			return id, false
		}
	}
	return newTraceID(), true
}

// parseTraceparent returns the trace id of a W3C traceparent header
// "version-traceid-parentid-flags": version 00 has exactly these four
// fields; a later version may have more after them; version ff is invalid;
// all hex is lowercase; neither id may be all zeros.
func parseTraceparent(h string) (string, bool) {
	h = strings.TrimSpace(h)
	if len(h) < 55 {
		return "", false
	}
	version, traceID, parentID, flags := h[0:2], h[3:35], h[36:52], h[53:55]
	if h[2] != '-' || h[35] != '-' || h[52] != '-' || !lowerHex(version) || version == "ff" ||
		!lowerHex(parentID) || strings.Trim(parentID, "0") == "" || !lowerHex(flags) || !arcp.ValidTraceID(traceID) {
		return "", false
	}
	if len(h) > 55 && (version == "00" || h[55] != '-') {
		return "", false
	}
	return traceID, true
}

func lowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func newTraceID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[0] |= 1 // never all zero
	return hex.EncodeToString(b[:])
}

// Submit extras.

// submitExtras are what SubmitJobRequest and RunJobRequest add to
// jobRequest.
type submitExtras interface {
	GetAgentVersion() string
	GetLeaseRequest() *sessiongatev1.Lease
	GetLeaseConstraints() *sessiongatev1.LeaseConstraints
	GetExtensions() map[string]*structpb.Value
}

const maxExtensionBytes = 64 << 10

// applyExtras validates the request's extras and puts them on sub; it
// returns the envelope options (the caller's trace id, the extensions).
// Features the extras need are checked against the session in
// checkExtraFeatures.
func applyExtras(ctx context.Context, req submitExtras, sub *arcp.Submit) (upstream.SubmitOptions, error) {
	var opts upstream.SubmitOptions
	if v := req.GetAgentVersion(); v != "" {
		if strings.Contains(sub.Agent, "@") {
			return opts, invalid("agent %q already names a version; leave agent_version empty", clip(sub.Agent))
		}
		if err := checkText("agent_version", v, maxNameLen); err != nil {
			return opts, err
		}
		if strings.ContainsAny(v, "@ ") {
			return opts, invalid("agent_version %q is not a version", clip(v))
		}
		sub.Agent += "@" + v
	}
	if l := req.GetLeaseRequest(); l != nil && len(l.GetCapabilities()) > 0 {
		lease := make(arcp.Lease, len(l.GetCapabilities()))
		for ns, p := range l.GetCapabilities() {
			if ns == "" || len(ns) > maxNameLen {
				return opts, invalid("lease_request: capability namespace %q is empty or too long", clip(ns))
			}
			lease[ns] = slices.Clone(p.GetPatterns())
			if lease[ns] == nil {
				lease[ns] = []string{}
			}
		}
		raw, err := json.Marshal(lease)
		if err != nil {
			return opts, invalid("lease_request: %v", err)
		}
		sub.LeaseRequest = raw
	}
	if c := req.GetLeaseConstraints(); c != nil && c.GetExpiresAt() != nil {
		at := c.GetExpiresAt()
		if err := at.CheckValid(); err != nil {
			return opts, invalid("lease_constraints.expires_at: %v", err)
		}
		if !at.AsTime().After(time.Now()) {
			return opts, invalid("lease_constraints.expires_at %s is not in the future", at.AsTime().UTC().Format(time.RFC3339Nano))
		}
		sub.LeaseConstraints = &arcp.LeaseConstraints{ExpiresAt: at.AsTime().UTC().Format(time.RFC3339Nano)}
	}
	if ext := req.GetExtensions(); len(ext) > 0 {
		opts.Extensions = make(map[string]json.RawMessage, len(ext))
		size := 0
		for k, v := range ext {
			if !arcp.ValidExtensionKey(k) || len(k) > maxNameLen {
				return opts, invalid("extension key %q must start with %q", clip(k), arcp.VendorPrefix)
			}
			raw, err := wirecodec.AppendJSON(nil, v)
			if err != nil {
				return opts, inputError(err)
			}
			if size += len(k) + len(raw); size > maxExtensionBytes {
				return opts, invalid("extensions are more than %d bytes of JSON", maxExtensionBytes)
			}
			opts.Extensions[k] = raw
		}
	}
	var fresh bool
	opts.TraceID, fresh = traceIDFrom(ctx)
	if sc := trace.SpanContextFromContext(ctx); fresh && sc.IsValid() {
		// Tracing is on and the caller sent no usable traceparent: the
		// job joins the RPC's own (new) trace.
		opts.TraceID = sc.TraceID().String()
	}
	return opts, nil
}

// submitAttrs are a submit span's attributes (§11 recommends
// arcp.lease.expires_at).
func submitAttrs(sub arcp.Submit, opts upstream.SubmitOptions) []attribute.KeyValue {
	a := []attribute.KeyValue{attribute.String("arcp.agent", sub.Agent), attribute.String("arcp.trace_id", opts.TraceID)}
	if sub.LeaseConstraints != nil {
		a = append(a, attribute.String("arcp.lease.expires_at", sub.LeaseConstraints.ExpiresAt))
	}
	return a
}

// checkExtraFeatures refuses extras whose feature the session did not
// negotiate: sending them would use a feature outside the intersection
// (§6.2).
func checkExtraFeatures(sub arcp.Submit, features []string) error {
	need := func(f, what string) error {
		if slices.Contains(features, f) {
			return nil
		}
		return gatewayStatus(codes.FailedPrecondition, "FEATURE_NOT_NEGOTIATED",
			what+" needs the "+f+" feature, which is not in effect on this session (see GetSessionStatus.features)",
			map[string]string{"feature": f})
	}
	if sub.LeaseConstraints != nil {
		if err := need(arcp.FeatureLeaseExpiresAt, "lease_constraints.expires_at"); err != nil {
			return err
		}
	}
	if len(sub.LeaseRequest) > 0 {
		lease, _ := arcp.ParseLease(sub.LeaseRequest)
		for _, f := range []string{arcp.FeatureCostBudget, arcp.FeatureModelUse} {
			if _, ok := lease[f]; ok {
				if err := need(f, "lease_request["+f+"]"); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// Answers.

func leaseProto(raw json.RawMessage) *sessiongatev1.Lease {
	if wirecodec.IsEmptyObject(raw) {
		// What job.accepted carries for a job without a lease request
		// (§9): no need for encoding/json's reflection.
		return &sessiongatev1.Lease{}
	}
	l, err := arcp.ParseLease(raw)
	if err != nil || l == nil {
		return nil
	}
	out := &sessiongatev1.Lease{Capabilities: make(map[string]*sessiongatev1.LeasePatterns, len(l))}
	for ns, p := range l {
		out.Capabilities[ns] = &sessiongatev1.LeasePatterns{Patterns: p}
	}
	return out
}

func constraintsProto(raw json.RawMessage) *sessiongatev1.LeaseConstraints {
	c, err := arcp.ParseLeaseConstraints(raw)
	if err != nil || c == nil {
		return nil
	}
	return &sessiongatev1.LeaseConstraints{ExpiresAt: parseTime(c.ExpiresAt)}
}

func budgetProto(raw json.RawMessage) map[string]float64 {
	b, _ := arcp.ParseBudget(raw)
	return b
}

// extensionsProto converts an envelope's x-vendor.* extensions; others,
// and values with no google.protobuf.Value form, are left out.
func extensionsProto(ext map[string]json.RawMessage) map[string]*structpb.Value {
	var out map[string]*structpb.Value
	for k, raw := range ext {
		if !arcp.ValidExtensionKey(k) || !valueDepthOK(raw) {
			continue
		}
		if v, ok := wirecodec.JSONValue(raw); ok {
			if out == nil {
				out = make(map[string]*structpb.Value)
			}
			out[k] = v
		}
	}
	return out
}

// submitResponse is SubmitJob's answer for acc.
func submitResponse(acc arcp.Accepted) *sessiongatev1.SubmitJobResponse {
	return &sessiongatev1.SubmitJobResponse{
		JobId: acc.JobID, AcceptedAt: parseTime(acc.AcceptedAt), Agent: acc.Agent, TraceId: acc.TraceID,
		Lease: leaseProto(acc.Lease), LeaseConstraints: constraintsProto(acc.LeaseConstraints),
		Budget: budgetProto(acc.Budget), Extensions: extensionsProto(acc.Extensions),
	}
}

// decorateRun adds to RunJob's answer what the accept and the terminal say
// besides the result.
func decorateRun(resp *sessiongatev1.RunJobResponse, acc arcp.Accepted, term upstream.Terminal) {
	resp.Agent, resp.TraceId = acc.Agent, acc.TraceID
	resp.Lease, resp.LeaseConstraints, resp.Budget = leaseProto(acc.Lease), constraintsProto(acc.LeaseConstraints), budgetProto(acc.Budget)
	if term.Result != nil {
		resp.ResultId, resp.ResultSize = term.Result.ResultID, term.Result.ResultSize
	}
	resp.Extensions = extensionsProto(term.Extensions)
}

// decorateItem adds the typed parts of a WatchJob item: progress and
// result-chunk metadata, a streamed result's id and size, extensions.
func decorateItem(msg *sessiongatev1.WatchJobResponse, item upstream.Item) {
	msg.Extensions = extensionsProto(item.Extensions)
	switch {
	case item.Event != nil:
		ev := msg.GetEvent()
		switch item.Event.Kind {
		case arcp.KindProgress:
			if p, ok := arcp.ParseProgress(item.Event.Body); ok {
				ev.Progress = &sessiongatev1.Progress{Current: p.Current, Total: p.Total, Units: p.Units, Message: p.Message}
			}
		case arcp.KindResultChunk:
			if c, ok := arcp.ParseResultChunk(item.Event.Body); ok {
				ev.ResultChunk = &sessiongatev1.ResultChunk{ResultId: c.ResultID, ChunkSeq: c.ChunkSeq, Encoding: c.Encoding, More: c.More}
			}
		}
	case item.Result != nil:
		res := msg.GetResult()
		res.ResultId, res.ResultSize = item.Result.ResultID, item.Result.ResultSize
	}
}

// jobState maps an ARCP status.
func jobState(s string) sessiongatev1.JobState {
	switch s {
	case "pending":
		return sessiongatev1.JobState_JOB_STATE_PENDING
	case "running":
		return sessiongatev1.JobState_JOB_STATE_RUNNING
	case arcp.StatusSuccess:
		return sessiongatev1.JobState_JOB_STATE_SUCCEEDED
	case arcp.StatusError:
		return sessiongatev1.JobState_JOB_STATE_FAILED
	case arcp.StatusCancelled:
		return sessiongatev1.JobState_JOB_STATE_CANCELLED
	case arcp.StatusTimedOut:
		return sessiongatev1.JobState_JOB_STATE_TIMED_OUT
	}
	return sessiongatev1.JobState_JOB_STATE_UNSPECIFIED
}

var stateNames = map[string]string{
	"PENDING": "pending", "RUNNING": "running", "SUCCEEDED": arcp.StatusSuccess, "FAILED": arcp.StatusError,
	"CANCELLED": arcp.StatusCancelled, "TIMED_OUT": arcp.StatusTimedOut,
}

func jobProto(j arcp.JobInfo) *sessiongatev1.Job {
	created := j.CreatedAt
	if created == "" {
		created = j.AcceptedAt
	}
	return &sessiongatev1.Job{
		JobId: j.JobID, Agent: j.Agent, State: jobState(j.Status), RawStatus: j.Status,
		Lease: leaseProto(j.Lease), LeaseConstraints: constraintsProto(j.LeaseConstraints), Budget: budgetProto(j.Budget),
		ParentJobId: j.ParentJobID, CreateTime: parseTime(created), TraceId: j.TraceID, LastEventSeq: derefSeq(j.LastEventSeq),
	}
}

// ListJobs.

const (
	defaultPageSize = 50
	maxPageSize     = 1000
)

func (s *service) ListJobs(ctx context.Context, req *sessiongatev1.ListJobsRequest) (*sessiongatev1.ListJobsResponse, error) {
	if err := checkSessionID(req.GetSessionId()); err != nil {
		return nil, err
	}
	if err := checkText("filter", req.GetFilter(), 4096); err != nil {
		return nil, err
	}
	size := int(req.GetPageSize())
	switch {
	case size < 0:
		return nil, invalid("page_size %d is negative", size)
	case size == 0:
		size = defaultPageSize
	case size > maxPageSize:
		size = maxPageSize
	}
	filter, err := parseJobFilter(req.GetFilter())
	if err != nil {
		return nil, invalid("filter: %v", err)
	}
	caller := callerFrom(ctx)
	var cursor string
	if tok := req.GetPageToken(); tok != "" {
		if cursor, err = openPageToken(tok, caller, req.GetSessionId(), req.GetFilter()); err != nil {
			return nil, gatewayStatus(codes.InvalidArgument, "INVALID_PAGE_TOKEN", "page_token: "+err.Error(), nil)
		}
	}
	sess, release, err := s.acquire(ctx, req.GetSessionId())
	if err != nil {
		return nil, err
	}
	defer release()
	q := arcp.ListJobs{Limit: size, Cursor: cursor}
	if filter != (jobFilter{}) {
		q.Filter, _ = json.Marshal(filter.arcp())
	}
	jobs, next, err := s.listCallerJobs(ctx, sess, q)
	if err != nil {
		return nil, s.err(err)
	}
	resp := &sessiongatev1.ListJobsResponse{Jobs: make([]*sessiongatev1.Job, 0, len(jobs))}
	for _, j := range jobs {
		resp.Jobs = append(resp.Jobs, jobProto(j))
	}
	if next != "" {
		resp.NextPageToken = sealPageToken(caller, req.GetSessionId(), req.GetFilter(), next)
	}
	return resp, nil
}

// jobFilter is a parsed ListJobs filter.
type jobFilter struct {
	states       string // ARCP statuses, comma-joined (comparable)
	agent        string
	createdAfter string
}

func (f jobFilter) arcp() arcp.JobFilter {
	out := arcp.JobFilter{Agent: f.agent, CreatedAfter: f.createdAfter}
	if f.states != "" {
		out.Status = strings.Split(f.states, ",")
	}
	return out
}

// parseJobFilter parses the AIP-160 subset documented on
// ListJobsRequest.filter.
func parseJobFilter(s string) (jobFilter, error) {
	var f jobFilter
	toks, err := filterTokens(s)
	if err != nil {
		return f, err
	}
	i := 0
	next := func() string {
		if i < len(toks) {
			i++
			return toks[i-1]
		}
		return ""
	}
	comparison := func(field string) (string, string, error) {
		op, val := next(), next()
		if op == "" || val == "" {
			return "", "", fmt.Errorf("incomplete comparison on %q", field)
		}
		return op, val, nil
	}
	seen := map[string]bool{}
	for i < len(toks) {
		if len(seen) > 0 && next() != "AND" {
			return f, errors.New(`terms must be joined by AND (OR only inside "(state = A OR state = B)")`)
		}
		tok := next()
		if tok == "(" {
			var states []string
			for {
				if field := next(); field != "state" {
					return f, fmt.Errorf("only state comparisons may be grouped with OR, not %q", clip(field))
				}
				op, val, err := comparison("state")
				if err != nil {
					return f, err
				}
				st, ok := stateNames[val]
				if op != "=" || !ok {
					return f, fmt.Errorf("state must be compared with = to one of PENDING, RUNNING, SUCCEEDED, FAILED, CANCELLED, TIMED_OUT")
				}
				states = append(states, st)
				if t := next(); t == ")" {
					break
				} else if t != "OR" {
					return f, errors.New(`expected OR or ")"`)
				}
			}
			tok = "state"
			if seen[tok] {
				return f, errors.New("state may be filtered once")
			}
			seen[tok], f.states = true, strings.Join(states, ",")
			continue
		}
		if seen[tok] {
			return f, fmt.Errorf("%s may be filtered once", clip(tok))
		}
		seen[tok] = true
		op, val, err := comparison(tok)
		if err != nil {
			return f, err
		}
		switch tok {
		case "state":
			st, ok := stateNames[val]
			if op != "=" || !ok {
				return f, fmt.Errorf("state must be compared with = to one of PENDING, RUNNING, SUCCEEDED, FAILED, CANCELLED, TIMED_OUT")
			}
			f.states = st
		case "agent":
			if op != "=" {
				return f, errors.New("agent supports only =")
			}
			f.agent = strings.Trim(val, `"`)
		case "create_time":
			if op != ">" {
				return f, errors.New("create_time supports only >")
			}
			t, err := time.Parse(time.RFC3339Nano, strings.Trim(val, `"`))
			if y := t.UTC().Year(); err != nil || y < 0 || y > 9999 { // in UTC, still a 4-digit year
				return f, errors.New("create_time must be compared to an RFC 3339 time in quotes")
			}
			f.createdAfter = t.UTC().Format(time.RFC3339Nano)
		default:
			return f, fmt.Errorf("unknown field %q: filter on state, agent or create_time", clip(tok))
		}
	}
	return f, nil
}

// filterTokens splits a filter into words, quoted strings, operators and
// parentheses.
func filterTokens(s string) ([]string, error) {
	var toks []string
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			i++
		case c == '(' || c == ')' || c == '=' || c == '>' || c == '<' || c == ':':
			if (c == '>' || c == '<') && i+1 < len(s) && s[i+1] == '=' {
				toks = append(toks, s[i:i+2])
				i += 2
				continue
			}
			toks = append(toks, s[i:i+1])
			i++
		case c == '!' && i+1 < len(s) && s[i+1] == '=':
			toks = append(toks, "!=")
			i += 2
		case c == '"':
			j := strings.IndexByte(s[i+1:], '"')
			if j < 0 {
				return nil, errors.New("unterminated string")
			}
			toks = append(toks, s[i:i+j+2])
			i += j + 2
		default:
			j := i
			for j < len(s) && !strings.ContainsRune(" \t\n()=<>:!\"", rune(s[j])) {
				j++
			}
			if j == i { // a '!' without '='
				return nil, fmt.Errorf("unexpected %q", s[i])
			}
			toks = append(toks, s[i:j])
			i = j
		}
	}
	return toks, nil
}

// Page tokens: base64url(version 1, 8 bytes of SHA-256(caller), 8 bytes of
// SHA-256(filter), session id length and bytes, the runtime's cursor, then
// 16 bytes of HMAC-SHA-256 over the rest) under a key of this process. A
// token is valid only here, for the caller, session and filter it was
// issued with; the session lives on this process too (after a takeover by
// another instance the caller starts over).
// subscriberCancelError: subscription grants no cancel authority (§7.6).
func subscriberCancelError(jobID string) error {
	return gatewayStatus(codes.PermissionDenied, "SUBSCRIBER_CANNOT_CANCEL",
		"job "+clip(jobID)+" is observed by this session (SubscribeJob), not submitted through it: cancel it from the session that submitted it", nil)
}

// callerHasJob reports whether a live session of caller on runtime knows
// the job as one of its callers' (submitted, subscribed or adopted, also
// after its result was collected: upstream.Conn.Knows).
func (s *service) callerHasJob(caller, runtime, jobID string) bool {
	for _, o := range s.table.List(caller) {
		if o.Runtime == runtime && !o.Lost() && o.Conn.Knows(jobID) {
			return true
		}
	}
	return false
}

var pageKey = sync.OnceValue(func() []byte {
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	return k
})

func digest8(s string) []byte {
	h := sha256.Sum256([]byte(s))
	return h[:8]
}

func pageMAC(b []byte) []byte {
	m := hmac.New(sha256.New, pageKey())
	m.Write(b)
	return m.Sum(nil)[:16]
}

func sealPageToken(caller, sessionID, filter, cursor string) string {
	b := []byte{1}
	b = append(b, digest8(caller)...)
	b = append(b, digest8(filter)...)
	b = binary.AppendUvarint(b, uint64(len(sessionID)))
	b = append(b, sessionID...)
	b = append(b, cursor...)
	b = append(b, pageMAC(b)...)
	return base64.RawURLEncoding.EncodeToString(b)
}

func openPageToken(tok, caller, sessionID, filter string) (string, error) {
	bad := errors.New("not a page token this gateway issued: pass next_page_token unchanged")
	b, err := base64.RawURLEncoding.DecodeString(tok)
	// The decoder skips CR and LF and ignores trailing bits: only the
	// encoder's own spelling of a token is one.
	if err != nil || len(b) < 1+8+8+1+16 || b[0] != 1 || base64.RawURLEncoding.EncodeToString(b) != tok {
		return "", bad
	}
	body, mac := b[:len(b)-16], b[len(b)-16:]
	if !hmac.Equal(mac, pageMAC(body)) {
		return "", bad
	}
	n, w := binary.Uvarint(body[17:])
	if w <= 0 || uint64(len(body)-17-w) < n {
		return "", bad
	}
	sid := string(body[17+w : 17+w+int(n)])
	switch {
	case !hmac.Equal(body[1:9], digest8(caller)):
		return "", errors.New("issued to another caller")
	case sid != sessionID:
		return "", errors.New("issued for another session")
	case !hmac.Equal(body[9:17], digest8(filter)):
		return "", errors.New("issued with another filter: keep the filter unchanged while paging")
	}
	return string(body[17+w+int(n):]), nil
}

// SubscribeJob.

func (s *service) SubscribeJob(ctx context.Context, req *sessiongatev1.SubscribeJobRequest) (*sessiongatev1.SubscribeJobResponse, error) {
	if err := checkSessionID(req.GetSessionId()); err != nil {
		return nil, err
	}
	if err := checkJobID(req.GetJobId()); err != nil {
		return nil, err
	}
	if req.GetFromEventSeq() != 0 && !req.GetHistory() {
		return nil, invalid("from_event_seq needs history: true (without history only live events are sent)")
	}
	sess, release, err := s.acquire(ctx, req.GetSessionId())
	if err != nil {
		return nil, err
	}
	defer release()
	// Every session of a gateway may share one upstream principal, so the
	// runtime's "same principal" rule (§7.6, §14) cannot tell callers
	// apart: the gateway allows only jobs its own table knows for this
	// caller, on the same runtime.
	if !s.callerHasJob(sess.Caller, sess.Runtime, req.GetJobId()) {
		return nil, gatewayStatus(codes.NotFound, "JOB_NOT_FOUND",
			"job not found among the jobs of your sessions on this runtime (on this gateway instance)", nil)
	}
	sctx, span := upstreamSpan(ctx, "job.subscribe", attribute.String("arcp.job_id", req.GetJobId()))
	d, err := sess.Conn.SubscribeJob(sctx, arcp.Subscribe{JobID: req.GetJobId(), FromEventSeq: req.GetFromEventSeq(), History: req.GetHistory()})
	endSpan(span, err)
	if err != nil {
		return nil, s.err(err)
	}
	job := jobProto(arcp.JobInfo{
		JobID: d.JobID, Agent: d.Agent, Status: d.CurrentStatus, Lease: d.Lease, LeaseConstraints: d.LeaseConstraints,
		Budget: d.Budget, ParentJobID: d.ParentJobID, TraceID: d.TraceID,
	})
	if job.JobId == "" {
		job.JobId = req.GetJobId()
	}
	return &sessiongatev1.SubscribeJobResponse{Job: job, SubscribedFrom: d.SubscribedFrom, Replayed: d.Replayed}, nil
}

// derefSeq is a listed job's last_event_seq, 0 where the runtime left it out.
func derefSeq(p *uint64) uint64 {
	if p == nil {
		return 0
	}
	return *p
}
