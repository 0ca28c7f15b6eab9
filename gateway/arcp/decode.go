package arcp

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// DecodeOptions say which context-dependent checks Decode applies.
type DecodeOptions struct {
	// RequireSession demands session_id on the envelope. Set it for every
	// envelope after the handshake, and on session.welcome.
	RequireSession bool
	// MaxBytes rejects larger input before parsing. Zero means no limit; the
	// transport's read limit is then the only bound.
	MaxBytes int
}

// Reason classifies a decode failure, for counters and logs.
type Reason string

// Decode failure reasons.
const (
	ReasonTooLarge    Reason = "too_large"
	ReasonMalformed   Reason = "malformed"   // not a JSON object of the envelope's shape
	ReasonVersion     Reason = "bad_version" // arcp is not "1.1"
	ReasonMissingID   Reason = "missing_id"
	ReasonMissingType Reason = "missing_type"
	ReasonSession     Reason = "missing_session_id"
	ReasonTraceID     Reason = "bad_trace_id"
	ReasonJobID       Reason = "missing_job_id"
	ReasonEventSeq    Reason = "missing_event_seq"
)

// DecodeError is returned by Decode for input that is not a valid envelope.
type DecodeError struct {
	Reason Reason
	Detail string
}

func (e *DecodeError) Error() string {
	if e.Detail == "" {
		return "arcp: invalid envelope: " + string(e.Reason)
	}
	return "arcp: invalid envelope: " + string(e.Reason) + ": " + e.Detail
}

// Code is the ARCP error code a peer answers an invalid envelope with.
func (e *DecodeError) Code() string { return CodeInvalidRequest }

// Decode parses and validates one frame. Envelopes of unknown type decode
// successfully (check KnownType); their payload is left raw.
func Decode(data []byte, opts DecodeOptions) (*Envelope, error) {
	if opts.MaxBytes > 0 && len(data) > opts.MaxBytes {
		return nil, &DecodeError{Reason: ReasonTooLarge, Detail: fmt.Sprintf("%d bytes > %d", len(data), opts.MaxBytes)}
	}
	data = bytes.TrimSpace(data)
	if len(data) == 0 || data[0] != '{' {
		return nil, &DecodeError{Reason: ReasonMalformed, Detail: "not a JSON object"}
	}
	var env Envelope
	if err := json.Unmarshal(data, &env); err != nil {
		return nil, &DecodeError{Reason: ReasonMalformed, Detail: err.Error()}
	}
	if len(env.Payload) > 0 && !isObjectOrNull(env.Payload) {
		return nil, &DecodeError{Reason: ReasonMalformed, Detail: "payload is not an object"}
	}
	switch {
	case env.ARCP != Version:
		return nil, &DecodeError{Reason: ReasonVersion, Detail: fmt.Sprintf("%.16q", env.ARCP)}
	case env.ID == "":
		return nil, &DecodeError{Reason: ReasonMissingID}
	case env.Type == "":
		return nil, &DecodeError{Reason: ReasonMissingType}
	case env.TraceID != "" && !ValidTraceID(env.TraceID):
		return nil, &DecodeError{Reason: ReasonTraceID, Detail: fmt.Sprintf("%.40q", env.TraceID)}
	case opts.RequireSession && env.SessionID == "":
		return nil, &DecodeError{Reason: ReasonSession, Detail: env.Type}
	}
	// job.cancelled names the job in its payload in some dialects; every
	// other job-scoped message must carry it on the envelope.
	if JobScoped(env.Type) && env.JobID == "" && env.Type != TypeCancelled && env.Type != TypeAccepted {
		return nil, &DecodeError{Reason: ReasonJobID, Detail: env.Type}
	}
	if Sequenced(env.Type) && env.EventSeq == 0 {
		return nil, &DecodeError{Reason: ReasonEventSeq, Detail: env.Type}
	}
	return &env, nil
}

func isObjectOrNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && (raw[0] == '{' || bytes.Equal(raw, []byte("null")))
}

// DecodePayload unmarshals env's payload into a value of type T. A missing
// payload decodes as T's zero value.
func DecodePayload[T any](env *Envelope) (T, error) {
	var v T
	if len(env.Payload) == 0 || bytes.Equal(bytes.TrimSpace(env.Payload), []byte("null")) {
		return v, nil
	}
	if err := json.Unmarshal(env.Payload, &v); err != nil {
		return v, &DecodeError{Reason: ReasonMalformed, Detail: fmt.Sprintf("%s payload: %v", env.Type, err)}
	}
	return v, nil
}
