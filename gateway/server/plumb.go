package server

import (
	"github.com/sessiongate/sessiongate/gateway/budget"
	"github.com/sessiongate/sessiongate/gateway/upstream"
)

// attachRetained gives an upstream connection the opening caller's account
// of the gateway's retained-bytes budget: the connection reserves before it
// keeps a result or an event in memory and releases when it lets it go (a
// result once delivered to RunJob, an event log when trimmed or expired). A
// refused reservation surfaces as a *budget.ExceededError, which toStatus
// maps to RESOURCE_EXHAUSTED naming the budget.
func attachRetained(uc *upstream.Config, acct budget.Account) {
	uc.RetainedBytes = acct
}

// forget releases a delivered RunJob result upstream.
func forget(c *upstream.Conn, jobID string) { c.Forget(jobID) }

// waitJobEnd blocks until the job has ended on the runtime, been forgotten,
// or its session has ended.
func waitJobEnd(c *upstream.Conn, jobID string) { <-c.JobDone(jobID) }

// assemblyError: a streamed result (§8.4) could not be put together.
type assemblyError struct {
	jobID string
	err   error
}

func (e *assemblyError) Error() string {
	return "job " + e.jobID + ": the streamed result could not be assembled: " + e.err.Error()
}

func (e *assemblyError) Unwrap() error { return e.err }
