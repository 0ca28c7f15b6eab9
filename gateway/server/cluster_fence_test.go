package server

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sessiongate/sessiongate/gateway/arcp"
	"github.com/sessiongate/sessiongate/gateway/arcpruntime"
	"github.com/sessiongate/sessiongate/gateway/directory"
	"github.com/sessiongate/sessiongate/gateway/directory/redistest"
	"github.com/sessiongate/sessiongate/gateway/upstream"
	sessiongatev1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
)

const fencedMetric = "sessiongate_cluster_fenced_total"

// fenceAckLag is the rig's ClusterConfig.AckLag: a job's events are
// recorded that long after they arrived, far longer than a RunJob of the
// echo agent takes, even on a loaded machine.
const fenceAckLag = time.Second

// fenceRig is one cluster replica (gw-a) on a real redis-server and a
// reference runtime whose log is recorded, plus a second directory handle
// (gw-z, with a live lease) that plays the replica taking sessions over.
type fenceRig struct {
	gw     *Gateway
	client sessiongatev1.SessionGatewayClient
	reg    *prometheus.Registry
	rt     *arcpruntime.Server
	rtLog  *recordingHandler    // the runtime's log, every level
	dirCtr *directory.Counters  // gw-a's directory counters
	lease  *leaseLoop           // gw-a's lease (Directory.Run)
	other  *directory.Directory // gw-z
}

// startFenceRig starts the rig. Without redis-server the test is skipped,
// unless CI=true: then it fails (redistest.Start decides).
func startFenceRig(t *testing.T) *fenceRig {
	t.Helper()
	rd := redistest.Start(t)
	ctx := ctxT(t, 20*time.Second)
	rtLog := &recordingHandler{}
	rt := arcpruntime.NewTestServer(t, arcpruntime.Options{Logger: slog.New(rtLog)})
	key := testDirectoryKey()

	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	ctr := &directory.Counters{}
	d, err := directory.Open(ctx, rd.URL(), directory.Config{Instance: "gw-a", Advertise: addr, Keys: []string{key}, Counters: ctr})
	if err != nil {
		t.Fatal(err)
	}
	lease := &leaseLoop{d: d}
	lease.start()
	// The lease held before the session is opened: a claim made before
	// the first refresh is confirmed again after it (the core's rule for
	// a lease not held before), and that confirmation, not the write
	// under test, would be the one fenced.
	waitFor(t, 10*time.Second, "gw-a's first lease refresh", func() bool { return !d.LeaseValidUntil().IsZero() })
	reg := prometheus.NewRegistry()
	gw, err := New(Config{
		InstanceID: "gw-a", Runtimes: []Runtime{{Name: "default", URL: rt.URL()}},
		Upstream: upstream.Config{BackoffInitial: 5 * time.Millisecond, BackoffMax: 50 * time.Millisecond, InitTimeout: 5 * time.Second},
		Registry: reg,
		Cluster: &ClusterConfig{Directory: d, Advertise: addr, Secret: "cluster-fence-test-secret",
			AckEvery: 20 * time.Millisecond, AckLag: fenceAckLag},
	})
	if err != nil {
		t.Fatal(err)
	}
	conn := serveReplica(t, "gw-a", gw, lis, func() {
		lease.halt() // after Shutdown, as ClusterConfig.Directory requires
		_ = d.Close()
	})

	// gw-z advertises an address nothing listens on: it is never dialled
	// (the test makes no call that would be forwarded to it).
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	dead.Close()
	other, err := directory.Open(ctx, rd.URL(), directory.Config{Instance: "gw-z", Advertise: deadAddr, Keys: []string{key}})
	if err != nil {
		t.Fatal(err)
	}
	otherLease := &leaseLoop{d: other}
	otherLease.start()
	t.Cleanup(func() {
		otherLease.halt()
		_ = other.Close()
	})
	return &fenceRig{gw: gw, client: sessiongatev1.NewSessionGatewayClient(conn), reg: reg, rt: rt, rtLog: rtLog,
		dirCtr: ctr, lease: lease, other: other}
}

// closesSeen returns the types of the close messages (session.close,
// session.bye, session.closed) the runtime received for its session sid:
// it logs each one as "session closed by client".
func (h *recordingHandler) closesSeen(sid string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var types []string
	for _, r := range h.recs {
		if r.Message != "session closed by client" {
			continue
		}
		var id, typ string
		r.Attrs(func(a slog.Attr) bool {
			switch a.Key {
			case "session_id":
				id = a.Value.String()
			case "type":
				typ = a.Value.String()
			}
			return true
		})
		if id == sid {
			types = append(types, typ)
		}
	}
	return types
}

// TestClusterFencedWriteDetachesSilently: replica gw-a owns a session;
// another replica (gw-z) takes it over in the directory while gw-a's lease
// is gone; gw-a is back, and its next directory write for the session is
// refused (the epoch moved). gw-a then drops the session silently: it is
// no longer served here (status names gw-z), the runtime never receives a
// session.close (or bye) for it and still holds it, resumable by the new
// owner, and sessiongate_cluster_fenced_total rises by exactly one. Two
// writes lead there: the acked seq the directory loop records after a job's
// events, and the new resume token written after a reconnect's welcome.
func TestClusterFencedWriteDetachesSilently(t *testing.T) {
	for _, tc := range []struct {
		name string
		// write makes gw-a write the session's record.
		write  func(t *testing.T, ctx context.Context, f *fenceRig, id string)
		gen    uint64 // the upstream generation of gw-a's connection at the fence
		events bool   // gw-a had job events to record
	}{
		{
			// A job's events: the directory loop records their seq
			// (Update AckedSeq) fenceAckLag after they arrived, well
			// after the RunJob has returned.
			name: "acked-seq", gen: 1, events: true,
			write: func(t *testing.T, ctx context.Context, f *fenceRig, id string) {
				resp, err := f.client.RunJob(ctx, &sessiongatev1.RunJobRequest{SessionId: id, Agent: "echo",
					Input: mustValue(t, map[string]any{"fenced": "soon"})})
				if err != nil {
					t.Fatalf("RunJob on gw-a before the write: %v", err)
				}
				if resp.GetResult().GetStructValue().GetFields()["fenced"].GetStringValue() != "soon" {
					t.Fatalf("RunJob result %v", resp.GetResult())
				}
			},
		},
		{
			// The runtime drops the WebSocket: gw-a resumes and writes
			// the welcome's new token (Update ResumeToken).
			name: "resume-token", gen: 2,
			write: func(t *testing.T, _ context.Context, f *fenceRig, _ string) {
				if n := f.rt.Runtime().DropTransports(); n != 1 {
					t.Fatalf("DropTransports dropped %d transports, want gw-a's one", n)
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := startFenceRig(t)
			ctx := ctxT(t, 60*time.Second)
			c := f.gw.cluster
			opened, err := f.client.OpenSession(ctx, &sessiongatev1.OpenSessionRequest{ClientName: "fence"})
			if err != nil {
				t.Fatal(err)
			}
			id := opened.GetSessionId()
			c.mu.Lock()
			o := c.owned[id]
			c.mu.Unlock()
			if o == nil {
				t.Fatal("gw-a does not own the session it opened")
			}
			o.mu.Lock()
			epoch := o.epoch
			o.mu.Unlock()
			if epoch != 1 {
				t.Fatalf("gw-a holds the session at epoch %d, want 1 (claimed by OpenSession)", epoch)
			}
			upstreamID, caller := o.conn.Status().SessionID, o.caller
			rec, err := f.other.Get(ctx, id)
			if err != nil || rec.Owner != "gw-a" || rec.Epoch != 1 || !rec.OwnerLive || rec.UpstreamSessionID != upstreamID {
				t.Fatalf("directory record after OpenSession: %+v, %v; want gw-a's at epoch 1, lease live", rec, err)
			}

			// gw-a's lease goes (Run ends and deletes it). Run cancelled
			// in the middle of a refresh counts a lease failure, after
			// which gw-a's loop rewrites every record once: let that
			// rewrite (still at epoch 1) happen before the takeover, so
			// that the write below is the first after it.
			failures, updates := f.dirCtr.LeaseFailures.Load(), f.dirCtr.Updates.Load()
			f.lease.halt()
			if f.dirCtr.LeaseFailures.Load() != failures {
				waitFor(t, 20*time.Second, "gw-a's rewrite after a lease failure", func() bool {
					return f.dirCtr.Updates.Load() > updates
				})
			}
			waitFor(t, 20*time.Second, "gw-a's lease to be gone", func() bool {
				r, err := f.other.Get(ctx, id)
				return err == nil && !r.OwnerLive
			})
			took, err := f.other.Takeover(ctx, id)
			if err != nil {
				t.Fatalf("Takeover by gw-z: %v", err)
			}
			if took.Epoch != 2 || took.PreviousOwner != "gw-a" || took.Owner != "gw-z" {
				t.Fatalf("Takeover by gw-z: %+v, want epoch 2 from gw-a", took)
			}
			// The takeover itself tells gw-a nothing: it still serves the
			// session until it writes.
			if got := series(t, f.reg, fencedMetric, nil); got != 0 {
				t.Fatalf("%s = %v before gw-a wrote anything, want 0", fencedMetric, got)
			}
			if st := f.gw.svc.status(id, caller); st.GetStatus() != sessiongatev1.SessionStatus_SESSION_STATUS_LIVE {
				t.Fatalf("local status before gw-a wrote anything: %v", st)
			}
			// gw-a is back: its lease is live again.
			f.lease.start()
			waitFor(t, 20*time.Second, "gw-a's lease to be back", func() bool {
				_, err := f.other.Owner(ctx, "gw-a")
				return err == nil
			})

			before := f.rt.Runtime().Stats()
			if before.Sessions != 1 || before.LiveTransports != 1 {
				t.Fatalf("runtime before the write: %d sessions, %d transports; want gw-a's one", before.Sessions, before.LiveTransports)
			}
			dirFenced := f.dirCtr.Fenced.Load()

			tc.write(t, ctx, f, id)

			waitFor(t, 30*time.Second, "gw-a to drop the fenced session", func() bool {
				c.mu.Lock()
				defer c.mu.Unlock()
				select {
				case <-o.conn.Done():
					return c.owned[id] == nil
				default:
					return false
				}
			})
			// fence counts right after it has detached.
			waitFor(t, 10*time.Second, fencedMetric+" to count the fenced session", func() bool {
				return series(t, f.reg, fencedMetric, nil) >= 1
			})
			// Counted once.
			if got := series(t, f.reg, fencedMetric, nil); got != 1 {
				t.Fatalf("%s = %v after one fenced session, want 1", fencedMetric, got)
			}
			// Because a write of gw-a's was refused in Redis.
			if f.dirCtr.Fenced.Load() == dirFenced {
				t.Fatal("gw-a's directory saw no refused (fenced) write")
			}
			if st := o.conn.Status(); st.Generation != tc.gen || (st.LastEventSeq > 0) != tc.events {
				t.Fatalf("gw-a's connection: generation %d, last event seq %d; want generation %d, events %v",
					st.Generation, st.LastEventSeq, tc.gen, tc.events)
			}
			// Detached locally, not closed.
			if err := o.conn.Err(); !errors.Is(err, upstream.ErrDetached) {
				t.Fatalf("gw-a's connection ended with %v, want ErrDetached", err)
			}
			if st := f.gw.svc.status(id, caller); st.GetStatus() != sessiongatev1.SessionStatus_SESSION_STATUS_NOT_FOUND {
				t.Fatalf("gw-a's local table still serves the session: %v", st)
			}
			// A status probe through gw-a answers from the directory:
			// live, on gw-z.
			st, err := f.client.GetSessionStatus(ctx, &sessiongatev1.GetSessionStatusRequest{SessionId: id})
			if err != nil {
				t.Fatal(err)
			}
			if st.GetStatus() != sessiongatev1.SessionStatus_SESSION_STATUS_LIVE || st.GetInstanceId() != "gw-z" ||
				st.GetPhase() != sessiongatev1.SessionPhase_SESSION_PHASE_READY {
				t.Fatalf("status through gw-a after the fence: %v; want LIVE, READY on gw-z", st)
			}

			// The runtime: gw-a's WebSocket is gone, the session is not.
			rt := f.rt.Runtime()
			waitFor(t, 20*time.Second, "the runtime to see gw-a's transport end", func() bool {
				return rt.Stats().LiveTransports == 0
			})
			if n := rt.Stats().Sessions; n != 1 {
				t.Fatalf("the runtime holds %d sessions after the fence, want 1: the session was ended upstream", n)
			}
			if got := f.rtLog.closesSeen(upstreamID); len(got) != 0 {
				t.Fatalf("the runtime received %v for the fenced session: it must be dropped silently", got)
			}

			// The new owner resumes it upstream. With the directory's
			// token after an ack; after a reconnect with the token of
			// gw-a's last welcome, which gw-a could not record (its
			// write was the one refused).
			token := took.ResumeToken
			if tc.gen > 1 {
				token, _ = o.conn.ResumePoint()
			}
			nc, err := upstream.Dial(ctx, upstream.Config{URL: f.rt.URL(), Client: arcp.ClientInfo{Name: "fence-test", Version: "1"},
				InitTimeout: 5 * time.Second, Resume: &upstream.ResumeFrom{SessionID: upstreamID, ResumeToken: token, LastEventSeq: took.AckedSeq}})
			if err != nil {
				t.Fatalf("the new owner cannot resume the fenced session upstream: %v", err)
			}
			if got := nc.Status().SessionID; got != upstreamID {
				nc.Detach()
				t.Fatalf("resumed session %s, want %s", got, upstreamID)
			}
			// Its session.close is seen: the runtime's log does show
			// close messages (the check above could see one).
			if err := nc.Close(ctx); err != nil {
				t.Fatalf("the new owner's close: %v", err)
			}
			waitFor(t, 20*time.Second, "the runtime to log the new owner's session.close", func() bool {
				return len(f.rtLog.closesSeen(upstreamID)) == 1
			})
			if got := f.rtLog.closesSeen(upstreamID); got[0] != arcp.TypeClose {
				t.Fatalf("the runtime logged %v, want %s", got, arcp.TypeClose)
			}
			// Still counted once, passes of the loop later.
			if got := series(t, f.reg, fencedMetric, nil); got != 1 {
				t.Fatalf("%s = %v at the end, want 1", fencedMetric, got)
			}
		})
	}
}
