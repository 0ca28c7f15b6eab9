package hostile

// Mode names a script. A mode is served at the path /<mode>; the package
// documentation says what each does and what a gateway's caller should get.
type Mode string

// Correlation modes: who an answer belongs to.
const (
	// ModeEcho answers in order, echoing trace ids: the baseline, and the
	// unanswered-head schedule (Input.Hold).
	ModeEcho Mode = "echo"
	// ModeReorder answers each batch of submits in the order of their
	// Input.Rank, echoing each submit's trace id on its accept.
	ModeReorder Mode = "reorder"
	// ModeReorderNoEcho is ModeReorder with no trace id on any accept.
	ModeReorderNoEcho Mode = "reorder-noecho"
	// ModeStray sends, before each batch's accepts, a job.error for a job
	// it never accepted (no trace id on it).
	ModeStray Mode = "stray"
	// ModeStrayTraced is ModeStray with a trace id on the stray error that
	// names no submit.
	ModeStrayTraced Mode = "stray-traced"
	// ModeUnansweredHead behaves as ModeReorder; tests use it for the
	// unanswered-head schedule, so its counters stand apart.
	ModeUnansweredHead Mode = "unanswered-head"
)

// Garbage answers: every submit is answered with something unreadable.
const (
	ModeGarbageJSON        Mode = "garbage-json"         // invalid JSON
	ModeGarbageJobIDNumber Mode = "garbage-jobid-number" // "job_id": 12345
	ModeGarbageNoJobID     Mode = "garbage-no-jobid"     // an accept without job_id
)

// Runtime errors.
const (
	// ModeRetryableReject rejects every submit with session.error
	// {request_id, INTERNAL_ERROR, retryable: true}.
	ModeRetryableReject Mode = "retryable-reject"
	// ModeRetryableJobError accepts, then ends the job with job.error
	// {INTERNAL_ERROR, retryable: true, RetryableJobMessage}.
	ModeRetryableJobError Mode = "retryable-job-error"
	// ModeFatal accepts, then ends the session: a session.error without
	// request_id (Input.FatalCode, default PERMISSION_DENIED; not
	// retryable; FatalMessage), the socket closed, every resume refused
	// with the same error.
	ModeFatal Mode = "fatal-session-error"
)

// Resume tricks: the first transport is dropped right after the first
// accept; the resume is answered badly.
const (
	// ModeResumeOther welcomes the resume into another session id.
	ModeResumeOther Mode = "resume-other-session"
	// ModeResumeRefused answers the resume with session.error
	// UNAUTHENTICATED (not retryable) and ResumeRefusedMessage.
	ModeResumeRefused Mode = "resume-refused"
)

// Handshake attacks.
const (
	ModeHandshakeWrongFrame  Mode = "handshake-wrong-frame"  // hello answered with job.accepted
	ModeHandshakeUnknownType Mode = "handshake-unknown-type" // hello answered with session.frobnicate
	ModeHandshakeGarbage     Mode = "handshake-garbage"      // hello answered with invalid JSON
	ModeHandshakeError       Mode = "handshake-error"        // session.error UNAUTHENTICATED, HandshakeErrorMessage
	ModeSilent               Mode = "handshake-silent"       // hello never answered
	ModeSlowUpgrade          Mode = "slow-upgrade"           // the HTTP 101 response, a byte at a time, never ending
	ModeSlowWelcome          Mode = "slow-welcome"           // the welcome frame, a byte at a time
	// ModeSlowButSteady dribbles the upgrade, the welcome and every result
	// a byte per Options.Dribble/40 (2.5 ms): slow, but the handshake done
	// in about a second, each result in over half a second.
	ModeSlowButSteady Mode = "slow-but-steady"
)

// Heartbeat intervals in the welcome (the heartbeat feature is offered).
const (
	ModeHeartbeatMilli Mode = "heartbeat-0.001" // heartbeat_interval_sec: 0.001
	ModeHeartbeatZero  Mode = "heartbeat-0"     // heartbeat_interval_sec: 0
	ModeHeartbeatHuge  Mode = "heartbeat-huge"  // heartbeat_interval_sec: 1000000000000
)

// Frames and floods.
const (
	// ModeMalformed accepts, sends the frames of Input.Family, then the
	// result.
	ModeMalformed Mode = "malformed"
	// ModeFrameCap sends a result frame of exactly Input.PadTo bytes, and
	// replays it on every resume.
	ModeFrameCap Mode = "frame-cap"
	// ModeFlood parks results (Input.Park) and floods events (Input.Flood).
	ModeFlood Mode = "flood"
)

// Messages the error modes send, so tests can look for them.
const (
	FatalMessage          = "hostile: principal suspended by policy 7f3a"
	ResumeRefusedMessage  = "hostile: resume token revoked 91c2"
	HandshakeErrorMessage = "hostile: bearer token rejected 44d0"
	RetryableMessage      = "hostile: overloaded, try again 0b6e"
	RetryableJobMessage   = "hostile: agent overloaded, run it again 5d21"
)

// Families of malformed frames (Input.Family in ModeMalformed).
const (
	FamilyWrongTypes     = "wrong-types"
	FamilyMissingFields  = "missing-fields"
	FamilyUnknownTypes   = "unknown-types"
	FamilyInvalidUTF8    = "invalid-utf8"
	FamilyDuplicateKeys  = "duplicate-keys"
	FamilyBinary         = "binary"
	FamilyForeignSession = "foreign-session"
	// FamilyResultInvalidUTF8 sends no bad frames before the result; the
	// result itself carries a string that is not UTF-8.
	FamilyResultInvalidUTF8 = "result-invalid-utf8"
)

// Families lists every family of ModeMalformed.
var Families = []string{
	FamilyWrongTypes, FamilyMissingFields, FamilyUnknownTypes, FamilyInvalidUTF8,
	FamilyDuplicateKeys, FamilyBinary, FamilyForeignSession, FamilyResultInvalidUTF8,
}

// Modes lists every mode.
var Modes = []Mode{
	ModeEcho, ModeReorder, ModeReorderNoEcho, ModeStray, ModeStrayTraced, ModeUnansweredHead,
	ModeGarbageJSON, ModeGarbageJobIDNumber, ModeGarbageNoJobID,
	ModeRetryableReject, ModeRetryableJobError, ModeFatal,
	ModeResumeOther, ModeResumeRefused,
	ModeHandshakeWrongFrame, ModeHandshakeUnknownType, ModeHandshakeGarbage, ModeHandshakeError,
	ModeSilent, ModeSlowUpgrade, ModeSlowWelcome, ModeSlowButSteady,
	ModeHeartbeatMilli, ModeHeartbeatZero, ModeHeartbeatHuge,
	ModeMalformed, ModeFrameCap, ModeFlood,
}

func (m Mode) valid() bool {
	for _, k := range Modes {
		if k == m {
			return true
		}
	}
	return false
}

// Input is the job input the hostile runtime reads: the caller's token and
// directives for the script. Every field but Token is optional.
type Input struct {
	// Token is echoed in the job's result ({"token", "job_id"}), so a
	// caller handed another's job sees a token that is not its own.
	Token string `json:"token"`
	// Batch: hold this submit until Batch submits wait, then answer them
	// all, in Rank order. A partial batch is answered after the quiet
	// window (Options.QuietWindow) with no new submit.
	Batch int `json:"batch,omitempty"`
	// Rank is the submit's place in its batch's answer order.
	Rank int `json:"rank,omitempty"`
	// Hold: never answer this submit.
	Hold bool `json:"hold,omitempty"`
	// Family: the malformed frames ModeMalformed sends before the result.
	Family string `json:"family,omitempty"`
	// PadTo: ModeFrameCap pads the result frame to exactly this many bytes.
	PadTo int `json:"pad_to,omitempty"`
	// Flood: ModeFlood sends this many job.event frames for the job,
	// EventBytes each (about), then releases parked results (Release
	// "after", the default) or releases them first ("before"), then ends
	// the job.
	Flood      int    `json:"flood,omitempty"`
	EventBytes int    `json:"event_bytes,omitempty"`
	Release    string `json:"release,omitempty"`
	// ReleaseAt, when set, releases the parked results after this many
	// of the flood's events instead: in the middle of the flood, while the
	// session's buffer is full.
	ReleaseAt int `json:"release_at,omitempty"`
	// FatalCode: the code of ModeFatal's session.error.
	FatalCode string `json:"fatal_code,omitempty"`
	// Park: ModeFlood accepts the job and sends its result only when a
	// flood releases it.
	Park bool `json:"park,omitempty"`
}

// Result is what a job's result holds: the input's token and the job id.
type Result struct {
	Token string `json:"token"`
	JobID string `json:"job_id"`
	Pad   string `json:"pad,omitempty"`
}
