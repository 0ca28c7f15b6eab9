package server

import (
	"context"
	"errors"
	"strconv"

	"google.golang.org/grpc/codes"

	"github.com/sessiongate/sessiongate/gateway/arcp"
	"github.com/sessiongate/sessiongate/gateway/session"
	"github.com/sessiongate/sessiongate/gateway/upstream"
)

// Jobs per caller. Every session of a gateway may share one upstream
// principal, and the official runtimes scope both idempotency keys and
// session.list_jobs per principal. The gateway keeps the caller apart:
//
//   - Idempotency keys are per caller (namespaced by the caller's identity
//     on the wire): a retry from any session of the same caller gets the
//     same job; another caller's equal key is another job. A retry from a
//     second session of the caller is answered by the runtime with the
//     first session's job.accepted while the job's events go to the first
//     session: its result is taken from the session of this gateway that
//     owns the job, else from the runtime by job.subscribe (with history)
//     on the retrying session, else the call ends with ABORTED JOB_LOST
//     naming the job. Never a wait to the deadline. A reused key with other
//     input is the runtime's DUPLICATE_KEY: ALREADY_EXISTS.
//   - ListJobs shows only the jobs the caller's sessions on the runtime
//     know (submitted, subscribed or adopted through them; see
//     upstream.Conn.Knows), whatever the runtime lists. Paging stays
//     correct: a runtime page filtered down is followed by the next one
//     until the page is full, the runtime has no more, or maxListRounds
//     upstream requests were made; then next_page_token carries the
//     runtime's cursor, so a short page never ends the listing early.
//   - SubscribeJob attaches only a job of the caller's own (callerHasJob).

// maxListRounds bounds the session.list_jobs requests of one ListJobs call.
const maxListRounds = 10

// listCallerJobs lists the jobs of sess's caller: pages of the runtime's
// list from q.Cursor, filtered to the caller's jobs, up to q.Limit of them.
// It returns the runtime cursor to continue from ("" at the end).
func (s *service) listCallerJobs(ctx context.Context, sess *session.Session[*upstream.Conn], q arcp.ListJobs) ([]arcp.JobInfo, string, error) {
	want := q.Limit
	var out []arcp.JobInfo
	for round := 0; round < maxListRounds; round++ {
		q.Limit = want - len(out) // never more than fits: the runtime's cursor cannot resume mid-page
		lctx, span := upstreamSpan(ctx, "session.list_jobs")
		page, err := sess.Conn.ListJobs(lctx, q)
		endSpan(span, err)
		if err != nil {
			return nil, "", err
		}
		for _, j := range page.Jobs {
			if s.callerHasJob(sess.Caller, sess.Runtime, j.JobID) {
				out = append(out, j)
			}
		}
		if page.NextCursor == "" || len(out) >= want {
			return out, page.NextCursor, nil
		}
		q.Cursor = page.NextCursor
	}
	return out, q.Cursor, nil
}

// waitJob waits for the terminal of a job sess's submit was answered with.
// A job another session created (an idempotent replay, see above) is
// waited for at the session of this gateway that owns it, when there is
// one; else at sess, which attached it (or ended it as JOB_LOST). The
// owner is the session of the caller that was handed the job first: that
// also covers a retry the connection could not tell for a replay (one that
// carries the original's trace id, as a retry under the same traceparent
// does).
func (s *service) waitJob(ctx context.Context, sess *session.Session[*upstream.Conn], jobID string) (upstream.Terminal, error) {
	if o := s.jobOwner(sess, jobID); o != nil {
		term, err := o.Conn.Wait(ctx, jobID)
		if err == nil {
			sess.Conn.LetGo(jobID) // its record here gets nothing: it must not hold a live-job slot
		}
		if err == nil || !errors.Is(err, upstream.ErrUnknownJob) && !errors.Is(err, upstream.ErrResultEvicted) {
			return term, err
		}
		// The owner let the job go meanwhile: sess has it.
	}
	return sess.Conn.Wait(ctx, jobID)
}

// jobOwner returns another session of sess's caller on the same runtime
// that owns jobID and got it before sess, if sess's submit was answered
// with another session's job.
func (s *service) jobOwner(sess *session.Session[*upstream.Conn], jobID string) *session.Session[*upstream.Conn] {
	foreign := sess.Conn.OwnedElsewhere(jobID)
	mine, _ := sess.Conn.DeliveredAt(jobID)
	for _, o := range s.table.List(sess.Caller) {
		if o == sess || o.Runtime != sess.Runtime || o.Lost() || !o.Conn.HasJob(jobID) || o.Conn.OwnedElsewhere(jobID) {
			continue
		}
		if at, ok := o.Conn.DeliveredAt(jobID); foreign || ok && at.Before(mine) {
			return o
		}
	}
	return nil
}

// itemCode is a WatchJob item's error code: the ARCP code, or the
// gateway's own JOB_LOST.
func itemCode(code string) string {
	if code == upstream.CodeJobLost {
		return code
	}
	return arcp.NormalizeCode(code)
}

// jobLostStatus: the gateway cannot obtain the job's outcome (the runtime
// stopped streaming it after a resume and would not re-attach it, or it is
// another session's job the runtime would not attach here).
func jobLostStatus(jobID string, e *arcp.JobError) error {
	return gatewayStatus(codes.Aborted, "JOB_LOST", e.Message+"; the job's outcome is unknown: check it with ListJobs, or submit it again",
		map[string]string{"job_id": jobID})
}

// jobEdgeStatus maps the edge answers of CancelJob and WatchJob.
func jobEdgeStatus(err error) error {
	var ended *upstream.JobEndedError
	if errors.As(err, &ended) {
		return gatewayStatus(codes.FailedPrecondition, "JOB_ALREADY_ENDED",
			"job "+clip(ended.JobID)+" already ended ("+ended.FinalStatus+") before the cancel: nothing was cancelled",
			map[string]string{"job_id": ended.JobID, "final_status": ended.FinalStatus, "last_event_seq": strconv.FormatUint(ended.Seq, 10)})
	}
	var beyond *upstream.BeyondEndError
	errors.As(err, &beyond)
	last := strconv.FormatUint(beyond.LastSeq, 10)
	return gatewayStatus(codes.OutOfRange, "EVENT_SEQ_OUT_OF_RANGE",
		"from_event_seq is past the end of job "+clip(beyond.JobID)+": its terminal is event_seq "+last+"; watch from "+last+" or less",
		map[string]string{"job_id": beyond.JobID, "last_event_seq": last})
}

// forgetRun lets the connection forget a job whose result RunJob has
// delivered, except a job submitted under the caller's idempotency key:
// its result stays retained (JobRetention, under the session's caps and the
// retained-bytes budget) so that a retry from any session of the caller is
// answered with it (waitJob) instead of a job the runtime no longer has.
func (s *service) forgetRun(sess *session.Session[*upstream.Conn], req jobRequest, jobID string) {
	if req.GetIdempotencyKey() == "" {
		sess.Conn.Forget(jobID)
	}
}

// recheckObservers tells the caller's sessions on runtime that observe
// jobID (SubscribeJob) to check on it: its submitting session ended it as
// JOB_LOST, and a runtime that loses a job stops sending it to its
// subscribers too, without a resume on their side to notice
// (upstream.Conn.Recheck).
func (s *service) recheckObservers(caller, runtime, jobID string) {
	for _, o := range s.table.List(caller) {
		if o.Runtime == runtime {
			o.Conn.Recheck(jobID)
		}
	}
}
