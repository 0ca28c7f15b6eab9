package server

import (
	"context"

	"github.com/sessiongate/sessiongate/gateway/budget"
	"github.com/sessiongate/sessiongate/gateway/upstream"
)

// attachRetained gives an upstream connection the opening caller's account
// of the gateway's retained-bytes budget: the connection reserves before it
// keeps a result or an event in memory and releases when it lets it go (a
// result once delivered to RunJob, an event log when trimmed or expired). A
// refused reservation surfaces as a *budget.ExceededError, which toStatus
// maps to RESOURCE_EXHAUSTED naming the budget.
//
// upstream.Config has no field for it yet: until it has (see the issue 9
// plumbing note), retained bytes are bounded per session only, by
// Upstream.MaxBufferedBytes. The wiring is this one line:
//
//	uc.RetainedBytes = acct
func attachRetained(uc *upstream.Config, acct budget.Account) {
	_, _ = uc, acct
}

// What the server uses of an upstream connection when the connection offers
// it. The upstream package is being reworked; these let the server pick up
// the new methods the moment they exist, without a change here.
type (
	// jobForgetter drops a finished job's retained log (releasing its
	// retained bytes) once its result has been delivered, unless a watcher
	// still reads it. RunJob calls it after building its response.
	jobForgetter interface{ Forget(jobID string) }
	// jobEnder reports a job's end without consuming its result: the
	// channel is closed when the job's terminal has arrived, the connection
	// has forgotten the job, or the session has ended. holdUntilEnd prefers
	// it to Wait.
	jobEnder interface {
		JobDone(jobID string) <-chan struct{}
	}
)

// forget releases a delivered RunJob result upstream, if the connection can.
func forget(c *upstream.Conn, jobID string) {
	if f, ok := any(c).(jobForgetter); ok {
		f.Forget(jobID)
	}
}

// waitJobEnd blocks until the job has ended on the runtime, been forgotten,
// or its session has ended.
func waitJobEnd(c *upstream.Conn, jobID string) {
	if e, ok := any(c).(jobEnder); ok {
		<-e.JobDone(jobID)
		return
	}
	// Wait ends with the terminal, ErrUnknownJob or the session's end:
	// Close, loss and Drain all end the session.
	_, _ = c.Wait(context.Background(), jobID)
}
