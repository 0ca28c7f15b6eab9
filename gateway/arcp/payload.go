package arcp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Features defined by ARCP 1.1.
const (
	FeatureHeartbeat              = "heartbeat"
	FeatureAck                    = "ack"
	FeatureListJobs               = "list_jobs"
	FeatureSubscribe              = "subscribe"
	FeatureLeaseExpiresAt         = "lease_expires_at"
	FeatureCostBudget             = "cost.budget"
	FeatureModelUse               = "model.use"
	FeatureProvisionedCredentials = "provisioned_credentials"
	FeatureProgress               = "progress"
	FeatureResultChunk            = "result_chunk"
	FeatureAgentVersions          = "agent_versions"
)

// AllFeatures lists every ARCP 1.1 feature.
var AllFeatures = []string{
	FeatureHeartbeat, FeatureAck, FeatureListJobs, FeatureSubscribe, FeatureLeaseExpiresAt,
	FeatureCostBudget, FeatureModelUse, FeatureProvisionedCredentials, FeatureProgress,
	FeatureResultChunk, FeatureAgentVersions,
}

// Intersect returns the features present in both a and b, in a's order,
// without duplicates.
func Intersect(a, b []string) []string {
	out := make([]string, 0, len(a))
	for _, f := range a {
		if slices.Contains(b, f) && !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out
}

// Error codes.
const (
	CodePermissionDenied         = "PERMISSION_DENIED"
	CodeLeaseSubsetViolation     = "LEASE_SUBSET_VIOLATION"
	CodeJobNotFound              = "JOB_NOT_FOUND"
	CodeDuplicateKey             = "DUPLICATE_KEY"
	CodeAgentNotAvailable        = "AGENT_NOT_AVAILABLE"
	CodeAgentVersionNotAvailable = "AGENT_VERSION_NOT_AVAILABLE"
	CodeCancelled                = "CANCELLED"
	CodeTimeout                  = "TIMEOUT"
	CodeResumeWindowExpired      = "RESUME_WINDOW_EXPIRED"
	CodeHeartbeatLost            = "HEARTBEAT_LOST"
	CodeLeaseExpired             = "LEASE_EXPIRED"
	CodeBudgetExhausted          = "BUDGET_EXHAUSTED"
	CodeInvalidRequest           = "INVALID_REQUEST"
	CodeUnauthenticated          = "UNAUTHENTICATED"
	CodeInternalError            = "INTERNAL_ERROR"
	// CodeResourceExhausted is used by runtimes for their DoS caps.
	CodeResourceExhausted = "RESOURCE_EXHAUSTED"
)

var knownCodes = map[string]bool{
	CodePermissionDenied: true, CodeLeaseSubsetViolation: true, CodeJobNotFound: true,
	CodeDuplicateKey: true, CodeAgentNotAvailable: true, CodeAgentVersionNotAvailable: true,
	CodeCancelled: true, CodeTimeout: true, CodeResumeWindowExpired: true, CodeHeartbeatLost: true,
	CodeLeaseExpired: true, CodeBudgetExhausted: true, CodeInvalidRequest: true,
	CodeUnauthenticated: true, CodeInternalError: true, CodeResourceExhausted: true,
}

// NormalizeCode returns code if it is a known ARCP code, else INTERNAL_ERROR,
// as the protocol requires of unknown codes.
func NormalizeCode(code string) string {
	if knownCodes[code] {
		return code
	}
	return CodeInternalError
}

// Event kinds defined by ARCP 1.1. Vendor kinds start with VendorPrefix.
const (
	KindLog         = "log"
	KindThought     = "thought"
	KindToolCall    = "tool_call"
	KindToolResult  = "tool_result"
	KindStatus      = "status"
	KindMetric      = "metric"
	KindArtifactRef = "artifact_ref"
	KindDelegate    = "delegate"
	KindProgress    = "progress"
	KindResultChunk = "result_chunk"
	VendorPrefix    = "x-vendor."
)

// ClientInfo names the client in session.hello.
type ClientInfo struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
}

// RuntimeInfo names the runtime in session.welcome.
type RuntimeInfo struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
}

// Auth carries credentials in session.hello.
type Auth struct {
	Scheme string `json:"scheme"`
	Token  string `json:"token,omitempty"`
}

// Agent is an entry of the welcome's agent list. On the wire it is either a
// plain string (the name) or an object; both decode.
type Agent struct {
	Name     string   `json:"name"`
	Versions []string `json:"versions,omitempty"`
	Default  string   `json:"default,omitempty"`
}

// UnmarshalJSON accepts "name" or {"name":…, "versions":[…], "default":…}.
func (a *Agent) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		*a = Agent{}
		return json.Unmarshal(b, &a.Name)
	}
	type plain Agent
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*a = Agent(p)
	return nil
}

// Capabilities are exchanged in hello and welcome.
type Capabilities struct {
	Encodings []string `json:"encodings,omitempty"`
	Features  []string `json:"features,omitempty"`
	Agents    []Agent  `json:"agents,omitempty"`
}

// Resume asks, in session.hello, to resume an earlier session.
type Resume struct {
	SessionID    string `json:"session_id"`
	ResumeToken  string `json:"resume_token"`
	LastEventSeq uint64 `json:"last_event_seq"`
}

// Hello is the payload of session.hello.
type Hello struct {
	Client       ClientInfo   `json:"client"`
	Auth         Auth         `json:"auth"`
	Capabilities Capabilities `json:"capabilities"`
	Resume       *Resume      `json:"resume,omitempty"`
}

// Welcome is the payload of session.welcome.
type Welcome struct {
	Runtime     RuntimeInfo `json:"runtime"`
	ResumeToken string      `json:"resume_token"`
	// Numbers, not integers: a runtime may send fractions (0.5), which
	// the client clamps to its bounds rather than refusing the welcome.
	ResumeWindowSec      float64      `json:"resume_window_sec"`
	HeartbeatIntervalSec float64      `json:"heartbeat_interval_sec,omitempty"`
	Capabilities         Capabilities `json:"capabilities"`
}

// Error is the payload of session.error, and also the error type returned for
// it. It implements error.
type Error struct {
	Code      string          `json:"code"`
	Message   string          `json:"message"`
	Retryable bool            `json:"retryable"`
	Details   json.RawMessage `json:"details,omitempty"`
	RequestID string          `json:"request_id,omitempty"`
	JobID     string          `json:"job_id,omitempty"`
}

func (e *Error) Error() string {
	return fmt.Sprintf("arcp %s: %s", e.Code, e.Message)
}

// Ping is the payload of session.ping.
type Ping struct {
	Nonce  string `json:"nonce"`
	SentAt string `json:"sent_at,omitempty"`
}

// Pong is the payload of session.pong.
type Pong struct {
	PingNonce  string `json:"ping_nonce"`
	ReceivedAt string `json:"received_at,omitempty"`
}

// Ack is the payload of session.ack.
type Ack struct {
	LastProcessedSeq uint64 `json:"last_processed_seq"`
}

// ListJobs is the payload of session.list_jobs.
type ListJobs struct {
	Filter json.RawMessage `json:"filter,omitempty"`
	Limit  int             `json:"limit,omitempty"`
	Cursor string          `json:"cursor,omitempty"`
}

// JobInfo is an entry of session.jobs (§6.6).
type JobInfo struct {
	JobID            string          `json:"job_id"`
	Agent            string          `json:"agent,omitempty"`
	Status           string          `json:"status,omitempty"`
	AcceptedAt       string          `json:"accepted_at,omitempty"`
	CreatedAt        string          `json:"created_at,omitempty"`
	TraceID          string          `json:"trace_id,omitempty"`
	Lease            json.RawMessage `json:"lease,omitempty"`
	LeaseConstraints json.RawMessage `json:"lease_constraints,omitempty"`
	Budget           json.RawMessage `json:"budget,omitempty"`
	ParentJobID      string          `json:"parent_job_id,omitempty"`
	// LastEventSeq is the event_seq of the job's latest envelope in the
	// listing session; nil when the runtime left it out (a runtime may omit
	// a zero), so that its absence is never read as "no events".
	LastEventSeq *uint64 `json:"last_event_seq,omitempty"`
}

// JobFilter is the filter of session.list_jobs (§6.6); every field is
// optional.
type JobFilter struct {
	Status       []string `json:"status,omitempty"`
	Agent        string   `json:"agent,omitempty"`
	CreatedAfter string   `json:"created_after,omitempty"`
}

// Jobs is the payload of session.jobs.
type Jobs struct {
	RequestID  string    `json:"request_id"`
	Jobs       []JobInfo `json:"jobs"`
	NextCursor string    `json:"next_cursor,omitempty"`
}

// Close is the payload of session.close, session.closed and session.bye.
type Close struct {
	Reason string `json:"reason,omitempty"`
}

// Submit is the payload of job.submit.
type Submit struct {
	Agent          string          `json:"agent"`
	Input          json.RawMessage `json:"input,omitempty"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
	MaxRuntimeSec  int             `json:"max_runtime_sec,omitempty"`
	// LeaseRequest is a JSON object: capability namespace to patterns
	// (§9.1-9.2), e.g. {"fs.read": ["/w/**"], "cost.budget": ["USD:5.00"]}.
	LeaseRequest json.RawMessage `json:"lease_request,omitempty"`
	// LeaseConstraints bound the lease (§9.5; lease_expires_at).
	LeaseConstraints *LeaseConstraints `json:"lease_constraints,omitempty"`
}

// LeaseConstraints are a lease's bounds (§9.5): expires_at is RFC 3339 in
// UTC with a "Z" suffix.
type LeaseConstraints struct {
	ExpiresAt string `json:"expires_at,omitempty"`
}

// Accepted is the payload of job.accepted. Lease, LeaseConstraints and
// Budget are kept raw: a runtime's odd shape there must never make the
// accept unreadable (that would drop the transport); ParseLease,
// ParseLeaseConstraints and ParseBudget read them. Credentials
// (provisioned_credentials) are not decoded: the feature is never
// negotiated.
type Accepted struct {
	JobID            string          `json:"job_id"`
	Agent            string          `json:"agent,omitempty"`
	AcceptedAt       string          `json:"accepted_at"`
	Lease            json.RawMessage `json:"lease,omitempty"`
	LeaseConstraints json.RawMessage `json:"lease_constraints,omitempty"`
	Budget           json.RawMessage `json:"budget,omitempty"`
	TraceID          string          `json:"trace_id,omitempty"`
	// Extensions are the envelope's extensions, set by the receiver (not
	// part of the payload).
	Extensions map[string]json.RawMessage `json:"-"`
}

// Lease is a decoded lease: capability namespace to patterns.
type Lease map[string][]string

// ParseLease reads a lease or lease_request object. Empty or null input is
// no lease; anything else that is not {string: [string…]} is an error.
func ParseLease(raw json.RawMessage) (Lease, error) {
	if isNull(raw) {
		return nil, nil
	}
	var l Lease
	if err := json.Unmarshal(raw, &l); err != nil {
		return nil, fmt.Errorf("lease is not an object of string lists: %w", err)
	}
	return l, nil
}

// ParseLeaseConstraints reads lease_constraints. Empty or null is none.
func ParseLeaseConstraints(raw json.RawMessage) (*LeaseConstraints, error) {
	if isNull(raw) {
		return nil, nil
	}
	var c LeaseConstraints
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, fmt.Errorf("lease_constraints: %w", err)
	}
	return &c, nil
}

// ParseBudget reads budget counters: currency to amount. Empty or null is
// none.
func ParseBudget(raw json.RawMessage) (map[string]float64, error) {
	if isNull(raw) {
		return nil, nil
	}
	var b map[string]float64
	if err := json.Unmarshal(raw, &b); err != nil {
		return nil, fmt.Errorf("budget: %w", err)
	}
	return b, nil
}

func isNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || bytes.Equal(t, []byte("null"))
}

// Progress is the body of a progress event (§8.2.1).
type Progress struct {
	Current float64  `json:"current"`
	Total   *float64 `json:"total,omitempty"`
	Units   string   `json:"units,omitempty"`
	Message string   `json:"message,omitempty"`
}

// ParseProgress reads a progress body. It reports false unless the body is
// an object whose current is a non-negative number (total, when present, a
// number; units and message, when present, strings).
func ParseProgress(body json.RawMessage) (Progress, bool) {
	var w struct {
		Current *float64 `json:"current"`
		Total   *float64 `json:"total"`
		Units   string   `json:"units"`
		Message string   `json:"message"`
	}
	if json.Unmarshal(body, &w) != nil || w.Current == nil || *w.Current < 0 {
		return Progress{}, false
	}
	return Progress{Current: *w.Current, Total: w.Total, Units: w.Units, Message: w.Message}, true
}

// ResultChunk is the body of a result_chunk event (§8.4).
type ResultChunk struct {
	ResultID string `json:"result_id"`
	ChunkSeq uint64 `json:"chunk_seq"`
	Data     string `json:"data"`
	Encoding string `json:"encoding"`
	More     bool   `json:"more"`
}

// ParseResultChunk reads a result_chunk body's metadata. It reports false
// unless result_id is set and encoding is utf8 or base64.
func ParseResultChunk(body json.RawMessage) (ResultChunk, bool) {
	var c ResultChunk
	if json.Unmarshal(body, &c) != nil || c.ResultID == "" || (c.Encoding != "utf8" && c.Encoding != "base64") {
		return ResultChunk{}, false
	}
	return c, true
}

// ValidExtensionKey reports whether k may name an envelope extension the
// gateway passes through: "x-vendor." and at least one more character.
func ValidExtensionKey(k string) bool {
	return len(k) > len(VendorPrefix) && strings.HasPrefix(k, VendorPrefix)
}

// Event is the payload of job.event. Body is kept raw: vendor kinds pass
// through untouched.
type Event struct {
	Kind string          `json:"kind"`
	TS   string          `json:"ts,omitempty"`
	Body json.RawMessage `json:"body,omitempty"`
}

// IsVendorKind reports whether kind is a vendor event kind.
func IsVendorKind(kind string) bool { return strings.HasPrefix(kind, VendorPrefix) }

// Result is the payload of job.result. Runtimes name the value "result" or
// "output"; both decode into Result, and Result is what is sent.
type Result struct {
	FinalStatus string          `json:"final_status"`
	Result      json.RawMessage `json:"result,omitempty"`
	ResultID    string          `json:"result_id,omitempty"`
	ResultSize  int64           `json:"result_size,omitempty"`
	Summary     string          `json:"summary,omitempty"`
}

// UnmarshalJSON accepts the value under "result" or "output".
func (r *Result) UnmarshalJSON(b []byte) error {
	var w struct {
		FinalStatus string          `json:"final_status"`
		Result      json.RawMessage `json:"result"`
		Output      json.RawMessage `json:"output"`
		ResultID    string          `json:"result_id"`
		ResultSize  int64           `json:"result_size"`
		Summary     string          `json:"summary"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*r = Result{FinalStatus: w.FinalStatus, Result: w.Result, ResultID: w.ResultID, ResultSize: w.ResultSize, Summary: w.Summary}
	if len(r.Result) == 0 {
		r.Result = w.Output
	}
	return nil
}

// Final statuses of job.result and job.error.
const (
	StatusSuccess   = "success"
	StatusError     = "error"
	StatusCancelled = "cancelled"
	StatusTimedOut  = "timed_out"
)

// JobError is the payload of job.error.
type JobError struct {
	FinalStatus string          `json:"final_status"`
	Code        string          `json:"code"`
	Message     string          `json:"message"`
	Retryable   bool            `json:"retryable"`
	Details     json.RawMessage `json:"details,omitempty"`
}

func (e *JobError) Error() string {
	return fmt.Sprintf("arcp job %s (%s): %s", e.Code, e.FinalStatus, e.Message)
}

// Cancel is the payload of job.cancel.
type Cancel struct {
	Reason string `json:"reason,omitempty"`
}

// Cancelled is the payload of job.cancelled.
type Cancelled struct {
	JobID  string `json:"job_id,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// Subscribe is the payload of job.subscribe.
type Subscribe struct {
	JobID        string `json:"job_id"`
	FromEventSeq uint64 `json:"from_event_seq,omitempty"`
	History      bool   `json:"history,omitempty"`
}

// Subscribed is the payload of job.subscribed: the job's authority
// descriptor for the subscriber (§7.6). Lease, LeaseConstraints and Budget
// are raw as in Accepted.
type Subscribed struct {
	JobID            string          `json:"job_id"`
	CurrentStatus    string          `json:"current_status,omitempty"`
	Agent            string          `json:"agent,omitempty"`
	Lease            json.RawMessage `json:"lease,omitempty"`
	LeaseConstraints json.RawMessage `json:"lease_constraints,omitempty"`
	Budget           json.RawMessage `json:"budget,omitempty"`
	ParentJobID      string          `json:"parent_job_id,omitempty"`
	TraceID          string          `json:"trace_id,omitempty"`
	SubscribedFrom   uint64          `json:"subscribed_from,omitempty"`
	Replayed         bool            `json:"replayed,omitempty"`
	// FromEventSeq echoes the request's from_event_seq (earlier versions
	// of the reference runtime sent only this).
	FromEventSeq uint64 `json:"from_event_seq,omitempty"`
}

// Unsubscribe is the payload of job.unsubscribe.
type Unsubscribe struct {
	JobID string `json:"job_id"`
}
