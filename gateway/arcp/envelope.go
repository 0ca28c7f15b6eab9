package arcp

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Version is the protocol version this package speaks.
const Version = "1.1"

// Message types.
const (
	TypeHello       = "session.hello"
	TypeWelcome     = "session.welcome"
	TypeError       = "session.error"
	TypePing        = "session.ping"
	TypePong        = "session.pong"
	TypeAck         = "session.ack"
	TypeListJobs    = "session.list_jobs"
	TypeJobs        = "session.jobs"
	TypeClose       = "session.close"
	TypeClosed      = "session.closed"
	TypeBye         = "session.bye"
	TypeSubmit      = "job.submit"
	TypeAccepted    = "job.accepted"
	TypeEvent       = "job.event"
	TypeResult      = "job.result"
	TypeJobError    = "job.error"
	TypeCancel      = "job.cancel"
	TypeCancelled   = "job.cancelled"
	TypeSubscribe   = "job.subscribe"
	TypeSubscribed  = "job.subscribed"
	TypeUnsubscribe = "job.unsubscribe"
)

var knownTypes = map[string]bool{
	TypeHello: true, TypeWelcome: true, TypeError: true, TypePing: true, TypePong: true,
	TypeAck: true, TypeListJobs: true, TypeJobs: true, TypeClose: true, TypeClosed: true,
	TypeBye: true, TypeSubmit: true, TypeAccepted: true, TypeEvent: true, TypeResult: true,
	TypeJobError: true, TypeCancel: true, TypeCancelled: true, TypeSubscribe: true,
	TypeSubscribed: true, TypeUnsubscribe: true,
}

// KnownType reports whether t is an ARCP 1.1 message type.
func KnownType(t string) bool { return knownTypes[t] }

// IsClose reports whether t is one of the three close messages the protocol's
// dialects use: session.close, session.closed or session.bye.
func IsClose(t string) bool { return t == TypeClose || t == TypeClosed || t == TypeBye }

// JobScoped reports whether envelopes of type t must carry job_id.
func JobScoped(t string) bool {
	switch t {
	case TypeAccepted, TypeEvent, TypeResult, TypeJobError, TypeCancel, TypeCancelled:
		return true
	}
	return false
}

// Sequenced reports whether envelopes of type t must carry event_seq.
func Sequenced(t string) bool {
	return t == TypeEvent || t == TypeResult || t == TypeJobError
}

// Envelope is the frame every ARCP message travels in.
type Envelope struct {
	ARCP       string                     `json:"arcp"`
	ID         string                     `json:"id"`
	Type       string                     `json:"type"`
	SessionID  string                     `json:"session_id,omitempty"`
	JobID      string                     `json:"job_id,omitempty"`
	TraceID    string                     `json:"trace_id,omitempty"`
	EventSeq   uint64                     `json:"event_seq,omitempty"`
	Payload    json.RawMessage            `json:"payload,omitempty"`
	Extensions map[string]json.RawMessage `json:"extensions,omitempty"`
}

// New returns an envelope of type typ with a fresh id, carrying payload
// (marshalled to JSON; nil means no payload).
func New(typ, sessionID string, payload any) (*Envelope, error) {
	env := &Envelope{ARCP: Version, ID: NewID(), Type: typ, SessionID: sessionID}
	if payload != nil {
		raw, err := json.Marshal(payload)
		if err != nil {
			return nil, fmt.Errorf("arcp: marshal %s payload: %w", typ, err)
		}
		env.Payload = raw
	}
	return env, nil
}

// Encode returns the JSON text of env after checking the fields every sender
// must set.
func Encode(env *Envelope) ([]byte, error) {
	if env.ARCP != Version {
		return nil, fmt.Errorf("arcp: encode: version %q, want %q", env.ARCP, Version)
	}
	if env.ID == "" || env.Type == "" {
		return nil, errors.New("arcp: encode: id and type are required")
	}
	return json.Marshal(env)
}

// NewID returns a UUIDv7 string: 48 bits of Unix milliseconds, then random
// bits, so ids sort by creation time and never repeat.
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[6:]) // crypto/rand.Read never fails on supported platforms.
	ms := uint64(time.Now().UnixMilli())
	binary.BigEndian.PutUint16(b[4:6], uint16(ms))
	binary.BigEndian.PutUint32(b[0:4], uint32(ms>>16))
	b[6] = b[6]&0x0f | 0x70 // version 7
	b[8] = b[8]&0x3f | 0x80 // RFC 9562 variant
	var out [36]byte
	hex.Encode(out[0:8], b[0:4])
	out[8] = '-'
	hex.Encode(out[9:13], b[4:6])
	out[13] = '-'
	hex.Encode(out[14:18], b[6:8])
	out[18] = '-'
	hex.Encode(out[19:23], b[8:10])
	out[23] = '-'
	hex.Encode(out[24:36], b[10:16])
	return string(out[:])
}

// ValidTraceID reports whether s is a W3C trace id: exactly 32 lowercase hex
// characters, not all zero.
func ValidTraceID(s string) bool {
	if len(s) != 32 {
		return false
	}
	zero := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			if c != '0' {
				zero = false
			}
		case c >= 'a' && c <= 'f':
			zero = false
		default:
			return false
		}
	}
	return !zero
}
