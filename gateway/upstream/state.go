package upstream

import "fmt"

// State is the phase of a connection.
type State int

// States. See the transition table.
const (
	StateConnecting   State = iota // dialing the first transport
	StateHandshaking               // hello sent, waiting for welcome
	StateReady                     // a transport is up and the session usable
	StateReconnecting              // the transport dropped; backing off or dialing to resume
	StateClosing                   // Close was called; session.close sent or being sent
	StateClosed                    // the session has ended (closed or lost)
	numStates
)

var stateNames = [numStates]string{"connecting", "handshaking", "ready", "reconnecting", "closing", "closed"}

func (s State) String() string {
	if s >= 0 && s < numStates {
		return stateNames[s]
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// transitions is the state machine. A row is the state left, a column the
// state entered.
//
//	connecting   → handshaking (dialed)          | closed (dial failed)
//	handshaking  → ready (welcome)                | reconnecting (resume attempt failed, retrying)
//	             | closing (Close during a resume) | closed (handshake failed for good)
//	ready        → reconnecting (transport lost)  | closing (Close) | closed (runtime ended the session)
//	reconnecting → handshaking (dialed)           | closing (Close) | closed (resume gave up)
//	closing      → closed
//	closed       → (none)
var transitions = [numStates][numStates]bool{
	StateConnecting:   {StateHandshaking: true, StateClosed: true},
	StateHandshaking:  {StateReady: true, StateReconnecting: true, StateClosing: true, StateClosed: true},
	StateReady:        {StateReconnecting: true, StateClosing: true, StateClosed: true},
	StateReconnecting: {StateHandshaking: true, StateClosing: true, StateClosed: true},
	StateClosing:      {StateClosed: true},
	StateClosed:       {},
}

// canTransition reports whether the state machine allows from → to.
func canTransition(from, to State) bool {
	if from < 0 || from >= numStates || to < 0 || to >= numStates {
		return false
	}
	return transitions[from][to]
}
