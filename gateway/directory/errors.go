package directory

import (
	"errors"
	"fmt"
)

var (
	// ErrFenced: the record's owner or epoch is not the caller's any more:
	// another replica took the session over, or the caller released it.
	// The caller must drop the session silently (never session.close it:
	// the upstream session now belongs to somebody else). Returned as a
	// *FencedError.
	ErrFenced = errors.New("directory: fenced: owner or epoch moved")
	// ErrExists: Claim found a record for the session id.
	ErrExists = errors.New("directory: session record exists")
	// ErrNotFound: no record for the session id: it was deleted by its owner,
	// it expired (the session TTL), or Redis lost its data. A caller that
	// believed it owned the session must not assume it still does.
	ErrNotFound = errors.New("directory: no such session")
	// ErrOwned: Takeover found the session owned by a replica whose lease is
	// live; forward the call to it. Returned as an *OwnedError.
	ErrOwned = errors.New("directory: session owned by a live replica")
	// ErrNoLease: the replica has no live lease (Owner).
	ErrNoLease = errors.New("directory: replica has no live lease")
	// ErrRecovering: no record for the session id, but the directory lost
	// its data a moment ago (its incarnation marker is missing or young):
	// owners are restoring their records, so this is no proof that the
	// session does not exist. Retry.
	ErrRecovering = errors.New("directory: recovering from a loss of its data")
	// ErrFlushed: Takeover refused: the directory's incarnation marker is
	// not the one this replica last saw (Marker): it lost its data since,
	// and the owner's absent lease proves nothing.
	ErrFlushed = errors.New("directory: lost its data since the marker was last read")
	// ErrInstanceInUse: another live process holds this instance id's
	// lease (CheckInstance).
	ErrInstanceInUse = errors.New("directory: instance id held by another live process")
	// ErrUnavailable: Redis could not be reached or did not answer in time.
	// Returned as an *UnavailableError naming the directory.
	ErrUnavailable = errors.New("directory: unavailable")
)

// FencedError is an ErrFenced with what the record holds now.
type FencedError struct {
	SessionID string
	Owner     string // current owner ("" = released)
	Epoch     uint64 // current epoch
}

func (e *FencedError) Error() string {
	return fmt.Sprintf("directory: session %q fenced: now owned by %q at epoch %d", e.SessionID, e.Owner, e.Epoch)
}

func (e *FencedError) Is(target error) bool { return target == ErrFenced }

// OwnedError is an ErrOwned with the owner and the address it advertises.
type OwnedError struct {
	SessionID string
	Owner     string // instance id
	Addr      string // advertised host:port of the owner
}

func (e *OwnedError) Error() string {
	return fmt.Sprintf("directory: session %q owned by live replica %q at %s", e.SessionID, e.Owner, e.Addr)
}

func (e *OwnedError) Is(target error) bool { return target == ErrOwned }

// UnavailableError says Redis failed an operation: unreachable, timed out, or
// answered with an error. Its message names the directory (the URL without
// its password) so that the gRPC edge can return UNAVAILABLE with a message
// an operator understands; errors.Is(err, ErrUnavailable) holds.
type UnavailableError struct {
	Addr string // redacted URL
	Op   string // claim, update, takeover, release, delete, get, owner, orphans, lease, ping
	Err  error
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("directory: redis at %s: %s: %v", e.Addr, e.Op, e.Err)
}

func (e *UnavailableError) Unwrap() error { return e.Err }

func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }

// errOpTimeout is the cause of an operation's own deadline.
var errOpTimeout = errors.New("no answer within the operation timeout")
