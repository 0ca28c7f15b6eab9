package timeoutprofile

import "time"

// Observer receives the events the SW4-002 §6 metrics count. The package
// timeoutprofile/tpprom implements it with Prometheus.
//
// ForMethod is called once per method, when the method's profile is first
// resolved and cached, so implementations can look up their label children
// there and keep the per-call path free of allocations. It may be called
// concurrently for different methods.
type Observer interface {
	ForMethod(profile, service, method string) MethodObserver
}

// MethodObserver receives one method's events. Its methods are called
// concurrently from every call of the method and must be cheap.
type MethodObserver interface {
	// Duration is called when a server-side call ends, with its duration.
	Duration(time.Duration)
	// Timeout is called when a server-side call ended because its budget ran out.
	Timeout()
	// Clamped is called when an override rule changed a request (never
	// with RuleNone), on the server and on the client side.
	Clamped(Rule)
}

type nopObserver struct{}

func (nopObserver) ForMethod(string, string, string) MethodObserver { return nopObserver{} }
func (nopObserver) Duration(time.Duration)                          {}
func (nopObserver) Timeout()                                        {}
func (nopObserver) Clamped(Rule)                                    {}
