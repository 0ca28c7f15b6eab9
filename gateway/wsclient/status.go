package wsclient

import (
	"errors"
	"fmt"
	"strconv"
)

// StatusCode is a WebSocket close status code (RFC 6455 section 7.4).
type StatusCode int

// Close status codes defined by RFC 6455 section 7.4.1 and the IANA
// "WebSocket Close Code Number Registry".
const (
	StatusNormalClosure           StatusCode = 1000
	StatusGoingAway               StatusCode = 1001
	StatusProtocolError           StatusCode = 1002
	StatusUnsupportedData         StatusCode = 1003
	StatusNoStatusRcvd            StatusCode = 1005 // never sent; reported when a close frame carries no code
	StatusAbnormalClosure         StatusCode = 1006 // never sent on the wire
	StatusInvalidFramePayloadData StatusCode = 1007
	StatusPolicyViolation         StatusCode = 1008
	StatusMessageTooBig           StatusCode = 1009
	StatusMandatoryExtension      StatusCode = 1010
	StatusInternalError           StatusCode = 1011
	StatusServiceRestart          StatusCode = 1012
	StatusTryAgainLater           StatusCode = 1013
	StatusBadGateway              StatusCode = 1014
	StatusTLSHandshake            StatusCode = 1015 // never sent on the wire
)

// String returns the code with its registered name, e.g. "1000 (normal closure)".
func (s StatusCode) String() string {
	name := ""
	switch s {
	case StatusNormalClosure:
		name = "normal closure"
	case StatusGoingAway:
		name = "going away"
	case StatusProtocolError:
		name = "protocol error"
	case StatusUnsupportedData:
		name = "unsupported data"
	case StatusNoStatusRcvd:
		name = "no status"
	case StatusAbnormalClosure:
		name = "abnormal closure"
	case StatusInvalidFramePayloadData:
		name = "invalid frame payload data"
	case StatusPolicyViolation:
		name = "policy violation"
	case StatusMessageTooBig:
		name = "message too big"
	case StatusMandatoryExtension:
		name = "mandatory extension"
	case StatusInternalError:
		name = "internal error"
	case StatusServiceRestart:
		name = "service restart"
	case StatusTryAgainLater:
		name = "try again later"
	case StatusBadGateway:
		name = "bad gateway"
	case StatusTLSHandshake:
		name = "TLS handshake"
	}
	if name == "" {
		return strconv.Itoa(int(s))
	}
	return strconv.Itoa(int(s)) + " (" + name + ")"
}

// validWireCode reports whether code may appear in a close frame: the
// codes RFC 6455 and the IANA registry define for use on the wire
// (1000-1003, 1007-1014) and the ranges for libraries and applications
// (3000-4999). 1004, 1005, 1006 and 1015 are reserved and never sent.
func validWireCode(code StatusCode) bool {
	switch {
	case code >= 1000 && code <= 1003:
		return true
	case code >= 1007 && code <= 1014:
		return true
	case code >= 3000 && code <= 4999:
		return true
	}
	return false
}

// CloseError is the error Read returns once the peer has closed the
// connection with a close frame. Code is StatusNoStatusRcvd when the frame
// carried no status code.
type CloseError struct {
	Code   StatusCode
	Reason string
}

func (e *CloseError) Error() string {
	if e.Reason == "" {
		return "wsclient: closed by peer with status " + e.Code.String()
	}
	return fmt.Sprintf("wsclient: closed by peer with status %s: %q", e.Code, e.Reason)
}

// CloseStatus returns the status code of the peer's close frame if err is
// (or wraps) a *CloseError, and -1 otherwise.
func CloseStatus(err error) StatusCode {
	var ce *CloseError
	if errors.As(err, &ce) {
		return ce.Code
	}
	return -1
}

// ErrMessageTooBig is wrapped by the error Read returns when a message is
// larger than Options.ReadLimit. The connection is then closed with status
// 1009.
var ErrMessageTooBig = errors.New("wsclient: message too big")

// ErrProtocol is wrapped by the error Read returns when the server broke
// RFC 6455 (see the package documentation for the cases). The connection is
// then closed with status 1002.
var ErrProtocol = errors.New("wsclient: protocol violation by the server")

// failure is an internal error of the reader that ends the connection with
// a close frame of the given code. err is what Read returns.
type failure struct {
	code   StatusCode
	reason string
	err    error
}

func (f *failure) Error() string { return f.err.Error() }

func protocolError(format string, args ...any) *failure {
	msg := fmt.Sprintf(format, args...)
	return &failure{
		code:   StatusProtocolError,
		reason: msg,
		err:    fmt.Errorf("%w: %s", ErrProtocol, msg),
	}
}

func tooBig(have, frame, limit int64) *failure {
	size := have + frame
	if size < have { // overflow: frame is close to 2^63
		size = frame
	}
	return &failure{
		code:   StatusMessageTooBig,
		reason: "message too big",
		err:    fmt.Errorf("%w: at least %d bytes, read limit is %d", ErrMessageTooBig, size, limit),
	}
}
