package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/sessiongate/sessiongate/gateway/cluster"
	"github.com/sessiongate/sessiongate/gateway/directory"
	"github.com/sessiongate/sessiongate/gateway/peerauth"
	"github.com/sessiongate/sessiongate/gateway/session"
	"github.com/sessiongate/sessiongate/gateway/upstream"
	"github.com/sessiongate/sessiongate/gateway/wirecodec"
	sessiongatev1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
)

// Metadata of cluster mode.
const (
	// MetadataSession is the session id a caller may send as request
	// metadata so that L7 balancers can hash on it; when present it must
	// equal the request's session_id (else INVALID_ARGUMENT).
	MetadataSession = "x-sessiongate-session"
	// MetadataOwner and MetadataOwnerAddr are set in the response header
	// and trailer of every session call in cluster mode: the instance id
	// of the session's owner and the address it advertises, so that smart
	// clients go direct next time.
	MetadataOwner     = "x-sessiongate-owner"
	MetadataOwnerAddr = "x-sessiongate-owner-addr"
	// MetadataServedBy names the replica the caller reached (which may
	// have forwarded the call to the owner).
	MetadataServedBy = "x-sessiongate-served-by"

	// Hop headers of a forwarded call. A call carrying any of them is
	// accepted only with a valid forwarding proof (gateway/peerauth), and
	// is never forwarded again.
	mdForwardedBy   = "x-sessiongate-forwarded-by"
	mdForwardCaller = "x-sessiongate-forwarded-caller"
	mdForwardAuth   = "x-sessiongate-forward-auth"
)

// readOnlyMethods are answered on any replica, from the local table or the
// directory, never forwarded and never triggering a takeover.
var readOnlyMethods = map[string]bool{
	sessiongatev1.SessionGateway_GetSessionStatus_FullMethodName: true,
}

type forwardedKey struct{}

// forwardedFrom returns the peer that forwarded the call ("" if none).
func forwardedFrom(ctx context.Context) string {
	if p, ok := ctx.Value(forwardedKey{}).(*pendingProof); ok {
		return p.from
	}
	return ""
}

// authFunc authenticates a call: a forwarding peer by its forwarding proof
// (the caller's identity is the peer's assertion), anyone else by bearer
// token. Forwarding metadata on a gateway not in cluster mode, for a method
// peers never forward, or incomplete, is refused here; the proof itself is
// checked once the request is known (checkProof, in clusterUnary and
// clusterStream): no client can pose as a peer.
func (g *Gateway) authFunc(ctx context.Context) (context.Context, error) {
	// Three lookups, not FromIncomingContext, which copies all of the
	// metadata on every call.
	by, caller, auth := metadata.ValueFromIncomingContext(ctx, mdForwardedBy), metadata.ValueFromIncomingContext(ctx, mdForwardCaller),
		metadata.ValueFromIncomingContext(ctx, mdForwardAuth)
	if by == nil && caller == nil && auth == nil {
		return g.ids.authFunc(ctx)
	}
	if g.cluster == nil {
		return nil, status.Error(codes.Unauthenticated, "forwarding metadata (x-sessiongate-forward*) is accepted only from cluster peers")
	}
	method, _ := grpc.Method(ctx)
	refuse := func(reason, why string) (context.Context, error) {
		g.cluster.m.forgedForwards.Inc()
		g.cluster.proofs.refused.WithLabelValues(reason).Inc()
		return nil, gatewayStatus(codes.Unauthenticated, "FORWARD_REFUSED", "forwarding metadata refused: "+why, map[string]string{"reason": reason})
	}
	if len(by) != 1 || len(caller) != 1 || len(auth) != 1 || by[0] == "" || caller[0] == "" {
		return refuse(peerauth.ReasonMalformed, "incomplete")
	}
	if !forwardable(method) {
		return refuse(peerauth.ReasonMalformed, "peers do not forward "+method)
	}
	if err := g.cluster.peerTransportOK(ctx); err != nil {
		return refuse(reasonNoPeerCert, err.Error())
	}
	ctx = context.WithValue(ctx, callerKey{}, caller[0])
	return context.WithValue(ctx, forwardedKey{}, &pendingProof{from: by[0], caller: caller[0], token: auth[0]}), nil
}

// outgoing is the metadata of a forwarded call: the caller's own metadata
// (x-timeout-ms, x-sessiongate-session, …; the deadline travels as
// grpc-timeout) without its credentials, plus the hop headers with a fresh
// forwarding proof for the replica to, session id and request digest.
func (c *clusterState) outgoing(ctx context.Context, method, caller, to, id string, digest [32]byte) context.Context {
	in, _ := metadata.FromIncomingContext(ctx) // a copy: its values are ours
	out := make(metadata.MD, len(in)+3)
	for k, v := range in {
		switch {
		case k == "authorization", k == "te", k == "content-type", k == "user-agent", strings.HasPrefix(k, ":"),
			strings.HasPrefix(k, "grpc-"), strings.HasPrefix(k, "x-sessiongate-forward"):
		default:
			out[k] = v
		}
	}
	out[mdForwardedBy] = []string{c.self}
	out[mdForwardCaller] = []string{caller}
	out[mdForwardAuth] = []string{c.signForward(to, caller, method, id, digest)}
	return metadata.NewOutgoingContext(ctx, out)
}

// methodInfo is what the interceptors know of a method, from the protobuf
// registry: generic, so that methods added to the service later are routed
// too.
type methodInfo struct {
	in, out       protoreflect.MessageType
	sessionField  protoreflect.FieldDescriptor // string session_id; nil: not session-scoped
	jobField      protoreflect.FieldDescriptor // string job_id, if any
	clientStreams bool
	serverStreams bool
}

var methods sync.Map // full method name → *methodInfo (nil when not routable)

func methodOf(full string) *methodInfo {
	if v, ok := methods.Load(full); ok {
		mi, _ := v.(*methodInfo)
		return mi
	}
	mi := lookupMethod(full)
	methods.Store(full, mi)
	return mi
}

func lookupMethod(full string) *methodInfo {
	svc, name, ok := strings.Cut(strings.TrimPrefix(full, "/"), "/")
	if !ok {
		return nil
	}
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(svc))
	if err != nil {
		return nil
	}
	sd, ok := d.(protoreflect.ServiceDescriptor)
	if !ok {
		return nil
	}
	md := sd.Methods().ByName(protoreflect.Name(name))
	if md == nil {
		return nil
	}
	in, err1 := protoregistry.GlobalTypes.FindMessageByName(md.Input().FullName())
	out, err2 := protoregistry.GlobalTypes.FindMessageByName(md.Output().FullName())
	if err1 != nil || err2 != nil {
		return nil
	}
	mi := &methodInfo{in: in, out: out, clientStreams: md.IsStreamingClient(), serverStreams: md.IsStreamingServer()}
	str := func(n protoreflect.Name) protoreflect.FieldDescriptor {
		if f := md.Input().Fields().ByName(n); f != nil && f.Kind() == protoreflect.StringKind && f.Cardinality() != protoreflect.Repeated {
			return f
		}
		return nil
	}
	mi.sessionField, mi.jobField = str("session_id"), str("job_id")
	if mi.sessionField == nil {
		// Not session-scoped, but a response carrying a session id
		// (OpenSession) is claimed; see claimFromResponse.
		return &methodInfo{in: in, out: out, clientStreams: mi.clientStreams, serverStreams: mi.serverStreams}
	}
	return mi
}

func fieldString(m any, f protoreflect.FieldDescriptor) string {
	if f == nil {
		return ""
	}
	pm, ok := m.(proto.Message)
	if !ok {
		return ""
	}
	return pm.ProtoReflect().Get(f).String()
}

// checkSessionHeader compares x-sessiongate-session with the body.
func checkSessionHeader(ctx context.Context, id string) error {
	for _, v := range metadata.ValueFromIncomingContext(ctx, MetadataSession) {
		if v != id {
			return gatewayStatus(codes.InvalidArgument, "SESSION_METADATA_MISMATCH",
				fmt.Sprintf("metadata %s %q does not match the request's session_id %q: send the same id in both", MetadataSession, clip(v), clip(id)),
				map[string]string{"field": "session_id"})
		}
	}
	return nil
}

// route decides what to do with a call for session id and, for a takeover,
// carries it out. It returns the decision, the owner's address (Forward,
// Misrouted) and the owner's instance. With cached, a call from a client
// (not forwarded) for a session held elsewhere may be sent to the owner
// remembered from an earlier directory read (see cluster.OwnerCache for
// why a stale entry is safe); without, the directory is read.
func (c *clusterState) route(ctx context.Context, id string, cached, write bool) (cluster.Action, string, string, error) {
	caller := callerFrom(ctx)
	f := cluster.Facts{Self: c.self, Forwarded: forwardedFrom(ctx) != ""}
	if sess, ok := c.table.Get(id, caller); ok && !sess.Lost() {
		f.Local = true
		if write && !c.mayServe(id) {
			// This replica's lease lapsed (or a flush is being
			// restored): it may have been taken over; no write until
			// its epoch is confirmed again.
			return cluster.TakeOver, "", "", errLeaseLapsed
		}
		return cluster.Route(f), "", c.self, nil
	}
	if cached && !f.Forwarded {
		// Not for a silent owner: its lease is read (cluster.Await).
		if owner, addr, ok := c.owners.Get(id, caller, time.Now()); ok && !c.silent.has(addr) {
			c.m.cacheHit.Inc()
			return cluster.Forward, addr, owner, nil
		}
		c.m.cacheMiss.Inc()
	}
	rec, err := c.dir.Get(ctx, id)
	c.observe(err)
	switch {
	case errors.Is(err, directory.ErrRecovering):
		// The directory lost its data a moment ago: owners are
		// restoring; never NOT_FOUND for a session that may be live.
		return cluster.Unavailable, "", "", err
	case errors.Is(err, directory.ErrNotFound):
		f.Dir = cluster.DirNone
	case err != nil:
		if ctx.Err() != nil {
			return cluster.Serve, "", "", err
		}
		c.m.dirErrors.WithLabelValues("get").Inc()
		return cluster.Unavailable, "", "", err
	default:
		f.Dir, f.CallerMatches = cluster.DirRecord, rec.Caller == caller
		f.Owner, f.OwnerLive, f.OwnerAddr = rec.Owner, rec.OwnerLive, rec.OwnerAddr
		f.OwnerLeaseLeft, f.FirstByte = rec.OwnerLeaseLeft, max(c.cfg.PeerFirstByte, 0)
		f.OwnerSilent = rec.OwnerAddr != "" && c.silent.has(rec.OwnerAddr)
	}
	a := cluster.Route(f)
	if a == cluster.Await {
		c.m.awaits.Inc()
		// A millisecond past the end Redis counts (PTTL is in whole ms).
		return a, f.OwnerAddr, f.Owner, &awaitLease{end: time.Now().Add(f.OwnerLeaseLeft + time.Millisecond)}
	}
	if a == cluster.Forward {
		c.owners.Put(id, caller, f.Owner, f.OwnerAddr, time.Now())
	}
	if a != cluster.TakeOver {
		return a, f.OwnerAddr, f.Owner, nil
	}
	if c.draining.Load() {
		// This replica is handing its sessions off: it takes none over,
		// but waits (briefly) for the replica that adopts this one and
		// forwards the call there.
		if !f.Forwarded {
			if owner, addr, ok := c.awaitOwner(ctx, id); ok {
				return cluster.Forward, addr, owner, nil
			}
		}
		return cluster.TakeOver, "", "", session.ErrDraining
	}
	_, _, err = c.takeOver(id, f.Owner, f.OwnerLive, "call")
	var owned *directory.OwnedError
	switch {
	case errors.Is(err, errNotYet):
		return cluster.TakeOver, "", "", errNotYet
	case errors.As(err, &owned):
		if f.Forwarded {
			return cluster.Misrouted, owned.Addr, owned.Owner, nil
		}
		c.owners.Put(id, caller, owned.Owner, owned.Addr, time.Now())
		return cluster.Forward, owned.Addr, owned.Owner, nil
	case errors.Is(err, directory.ErrNotFound):
		return cluster.NotFound, "", "", nil
	case err != nil:
		return cluster.TakeOver, "", "", err
	}
	return cluster.Serve, "", c.self, nil
}

// routeFunc is route's signature.
type routeFunc = func(ctx context.Context, id string, cached, write bool) (cluster.Action, string, string, error)

// routing is route, or the test's routeHook around it.
func (c *clusterState) routing(ctx context.Context, id string, cached, write bool) (cluster.Action, string, string, error) {
	if h := c.cfg.routeHook; h != nil {
		return h(c.route, ctx, id, cached, write)
	}
	return c.route(ctx, id, cached, write)
}

// awaitOwner polls the directory until another live replica owns the
// session (a sweeper adopts released sessions within SweepEvery), for at
// most drainForwardWait.
func (c *clusterState) awaitOwner(ctx context.Context, id string) (owner, addr string, ok bool) {
	wctx, cancel := context.WithTimeout(ctx, drainForwardWait)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		rec, err := c.dir.Get(wctx, id)
		if err == nil && rec.OwnerLive && rec.Owner != c.self && rec.OwnerAddr != "" {
			return rec.Owner, rec.OwnerAddr, true
		}
		if err != nil && !errors.Is(err, directory.ErrUnavailable) {
			return "", "", false
		}
		select {
		case <-wctx.Done():
			return "", "", false
		case <-tick.C:
		}
	}
}

// drainForwardWait bounds how long a draining replica waits for another to
// adopt a session it handed off before it answers UNAVAILABLE.
const drainForwardWait = 3 * time.Second

// awaitLease is route's error with cluster.Await: the owner is silent and
// its lease ends at end, before a forward's first-byte bound would; the
// call routes again then (CallWait.PauseUntil).
type awaitLease struct{ end time.Time }

func (e *awaitLease) Error() string {
	return "cluster: the owner is silent and its lease ends in " + time.Until(e.end).Round(time.Millisecond).String()
}

// errLeaseLapsed: this replica's lease lapsed; writes wait for its epochs
// to be confirmed again.
var errLeaseLapsed = errors.New("cluster: lease lapsed")

// isWrite says whether a session method changes the session (a submit, a
// cancel, a close); reads (Get…, List…, Watch…, server streams) are served
// by a holder whose lease lapsed, which keeps watches uncut through a
// directory outage.
func isWrite(fullMethod string, serverStreams bool) bool {
	if serverStreams {
		return false
	}
	name := fullMethod[strings.LastIndexByte(fullMethod, '/')+1:]
	return !strings.HasPrefix(name, "Get") && !strings.HasPrefix(name, "List") && !strings.HasPrefix(name, "Watch")
}

// routeError is the status of a decision that does not run the handler.
func (c *clusterState) routeError(a cluster.Action, id, owner, addr string, err error) error {
	switch {
	case errors.Is(err, errLeaseLapsed):
		return gatewayStatus(codes.Unavailable, "LEASE_LAPSED",
			"session "+id+" is held by this replica, whose directory lease lapsed: writes wait until it has confirmed it still owns the session; retry",
			map[string]string{"instance_id": c.self})
	case errors.Is(err, errNotYet):
		return gatewayStatus(codes.Unavailable, "OWNER_SUSPECT",
			"the owner of session "+id+" has no lease, but not yet for a full lease TTL as this replica observed it (or this replica is itself recovering from a directory outage): retry",
			map[string]string{"instance_id": c.self})
	case a == cluster.Await:
		return gatewayStatus(codes.Unavailable, "OWNER_UNREACHABLE",
			fmt.Sprintf("session owner %s at %s did not answer within %v and its lease ends in under that: retry; once it has ended another replica takes the session over", owner, addr, c.cfg.PeerFirstByte),
			map[string]string{"owner": owner, "owner_addr": addr})
	case errors.Is(err, directory.ErrRecovering):
		return gatewayStatus(codes.Unavailable, "DIRECTORY_RECOVERING",
			"session "+id+" is not in the cluster directory, which lost its data a moment ago; owners are restoring their records: retry",
			map[string]string{"instance_id": c.self})
	}
	switch a {
	case cluster.Unavailable:
		return gatewayStatus(codes.Unavailable, "DIRECTORY_UNAVAILABLE",
			"session "+id+" is not held by this replica and the cluster directory cannot be reached: "+err.Error()+"; retry, or call the session's owner",
			map[string]string{"instance_id": c.self})
	case cluster.Misrouted:
		return gatewayStatus(codes.Unavailable, "NOT_OWNER",
			fmt.Sprintf("session %s is owned by %s at %s; this forwarded call reached %s: retry, or call the owner directly", id, owner, addr, c.self),
			map[string]string{"owner": owner, "owner_addr": addr})
	}
	if err != nil {
		if _, ok := status.FromError(err); ok {
			return err
		}
		return toStatus(c.log, err)
	}
	return nil
}

// hints are the owner metadata of a response.
func (c *clusterState) hints(owner, addr string) metadata.MD {
	if owner == c.self {
		addr = c.cfg.Advertise
	}
	return metadata.Pairs(MetadataOwner, owner, MetadataOwnerAddr, addr, MetadataServedBy, c.self)
}

// relayHints are the owner hints a forwarder passes on with an answer:
// ownerHints(md) and served-by this replica, or hints(owner, addr) when md
// has none. They are made once per distinct hint (a few per peer) and
// shared: the caller hands them to SetHeader and SetTrailer, which copy,
// and never edits them.
func (c *clusterState) relayHints(md metadata.MD, owner, addr string) metadata.MD {
	o, a := md.Get(MetadataOwner), md.Get(MetadataOwnerAddr)
	if len(o) > 1 || len(a) > 1 {
		return c.relayHintsOf(md, owner, addr) // unusual: not worth a key
	}
	k := relayKey{owner: owner, addr: addr}
	if len(o)+len(a) > 0 {
		k = relayKey{fromAnswer: true, hasOwner: len(o) == 1, hasAddr: len(a) == 1}
		if k.hasOwner {
			k.owner = o[0]
		}
		if k.hasAddr {
			k.addr = a[0]
		}
	}
	if h, ok := c.relays.Load(k); ok {
		return h.(metadata.MD)
	}
	h := c.relayHintsOf(md, owner, addr)
	if c.relayCount.Add(1) > maxRelayHints {
		// Peers answer with their own hints, so a few entries per peer
		// are all there should be; a flood only costs a rebuild.
		c.relays.Clear()
		c.relayCount.Store(1)
	}
	c.relays.Store(k, h)
	return h
}

// relayKey is what relayHints depends on: the answer's owner hints, or the
// route's owner and address when the answer had none.
type relayKey struct {
	fromAnswer, hasOwner, hasAddr bool
	owner, addr                   string
}

// maxRelayHints bounds relayHints' cache.
const maxRelayHints = 1024

func (c *clusterState) relayHintsOf(md metadata.MD, owner, addr string) metadata.MD {
	h := ownerHints(md)
	if len(h) == 0 {
		h = c.hints(owner, addr)
	}
	h.Set(MetadataServedBy, c.self)
	return h
}

// ownerHints picks the owner metadata out of a peer's response metadata.
func ownerHints(md metadata.MD) metadata.MD {
	out := metadata.MD{}
	for _, k := range []string{MetadataOwner, MetadataOwnerAddr} {
		if v := md.Get(k); len(v) > 0 {
			out[k] = v
		}
	}
	return out
}

// prepareLocal readies a session call served here: a job of a taken-over
// session is adopted before the handler looks it up (so WatchJob resumes
// from the caller's cursor), and the owner hint is set.
func (c *clusterState) prepareLocal(ctx context.Context, id, jobID string) error {
	if jobID == "" {
		return nil
	}
	o := c.adoptedSession(id)
	if o == nil {
		return nil
	}
	err := o.conn.AdoptJob(ctx, jobID)
	switch {
	case err == nil, errors.Is(err, upstream.ErrUnknownJob):
		return nil // the handler answers JOB_NOT_FOUND
	case errors.Is(err, upstream.ErrSlowConsumer):
		return gatewayStatus(codes.FailedPrecondition, "EVENTS_NOT_RETAINED",
			"job "+clip(jobID)+" ended before this replica took the session over and its events are no longer retained", map[string]string{"job_id": jobID})
	}
	return toStatus(c.log, err)
}

// clusterUnary routes session calls: checks x-sessiongate-session, serves
// a session held here, forwards one owned elsewhere (with the caller's
// identity, deadline and x-timeout-ms; never twice), takes over one whose
// owner is gone, and claims sessions OpenSession created. It is generic: it
// finds the session id of any method's request through the protobuf
// registry.
func (g *Gateway) clusterUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	mi := methodOf(info.FullMethod)
	if mi == nil {
		return handler(ctx, req)
	}
	c := g.cluster
	if mi.sessionField == nil {
		resp, err := handler(ctx, req)
		if c != nil && err == nil {
			if id := fieldString(resp, mi.out.Descriptor().Fields().ByName("session_id")); id != "" {
				c.claimOpened(id, callerFrom(ctx))
			}
		}
		return resp, err
	}
	id, jobID, err := requestIDs(req, mi)
	if err != nil {
		return nil, err
	}
	if err := c.checkProof(ctx, info.FullMethod, id, req); err != nil {
		return nil, err
	}
	if err := checkSessionHeader(ctx, id); err != nil {
		return nil, err
	}
	if c == nil || readOnlyMethods[info.FullMethod] || !validSessionID(id) {
		return handler(ctx, req)
	}
	pace := c.newPace()
	for attempt := 0; ; attempt++ {
		a, addr, owner, err := c.routing(ctx, id, attempt == 0, isWrite(info.FullMethod, false))
		if c.mayWait(ctx, a, err) && pace.pause(ctx) || a == cluster.Await && pace.until(ctx, err) {
			continue
		}
		switch a {
		case cluster.Serve, cluster.NotFound:
			if err != nil {
				return nil, c.routeError(a, id, owner, addr, err)
			}
			c.inflight.Add(1)
			if a == cluster.Serve && c.handingOff.Load() {
				// The hand-off is detaching this replica's sessions:
				// the handler would find this one gone. Routed again
				// once it is handed off (then forwarded to the
				// adopter); a forwarded call is refused (DRAINING,
				// before the handler), and its forwarder routes it.
				c.inflight.Add(-1)
				if forwardedFrom(ctx) == "" && pace.pause(ctx) {
					continue
				}
				return nil, c.routeError(a, id, owner, addr, session.ErrDraining)
			}
			forwarded := forwardedFrom(ctx) != ""
			if a == cluster.Serve {
				if forwarded {
					// At once, before the handler: the forwarder's
					// sign that the call was taken (PeerFirstByte).
					sendOwnerHeader(ctx, nil, c.selfHints)
				}
				if err := c.prepareLocal(ctx, id, jobID); err != nil {
					c.inflight.Add(-1)
					return nil, err
				}
			}
			mark := &detachMark{}
			resp, err := handler(context.WithValue(ctx, detachKey{}, mark), req)
			c.inflight.Add(-1)
			if err != nil && mark.detached.Load() {
				// The session was handed off (hand-off, rebalance,
				// fence) between routing and the handler's lookup,
				// which failed before anything reached the runtime:
				// routed again, to the session's new owner; a
				// forwarded call is refused as not the owner's, and
				// its forwarder routes it again.
				if forwarded {
					return nil, gatewayStatus(codes.Unavailable, "NOT_OWNER",
						"session "+id+" was handed off by "+c.self+" before this forwarded call ran: retry, or call the session's owner",
						map[string]string{"instance_id": c.self})
				}
				if pace.pause(ctx) {
					continue
				}
			}
			if a == cluster.Serve {
				if !forwarded {
					_ = grpc.SetHeader(ctx, c.selfHints)
				}
				_ = grpc.SetTrailer(ctx, c.selfHints)
			}
			if err == nil && info.FullMethod == sessiongatev1.SessionGateway_CloseSession_FullMethodName {
				c.closedByCaller(id)
			}
			return resp, err
		case cluster.Forward:
			if !pace.forward(ctx, owner, addr) {
				return nil, pace.last
			}
			resp, retry, err := c.forwardUnary(ctx, info.FullMethod, mi, req, id, owner, addr, attempt)
			if !retry {
				return resp, err
			}
			pace.refused(owner, addr, err)
			continue
		}
		return nil, c.routeError(a, id, owner, addr, err)
	}
}

// callPace is a call's cluster.CallWait, with the sleeps it answers and
// the last refusal of a forward (the call's answer when its wait is over).
type callPace struct {
	w    cluster.CallWait
	last error
}

func (c *clusterState) newPace() callPace {
	return callPace{w: cluster.CallWait{Limit: c.cfg.OwnerWait}}
}

// pause sleeps the call's next pause before it is routed again; false: its
// wait is over (or the caller gave up), and the call gets the answer it has.
func (p *callPace) pause(ctx context.Context) bool {
	d, ok := p.w.Pause(time.Now(), deadlineOf(ctx))
	return ok && sleepCtx(ctx, d)
}

// until sleeps until the silent owner's lease ends (route's awaitLease),
// within the call's wait; false: the wait is over (or the caller gave up).
func (p *callPace) until(ctx context.Context, err error) bool {
	var aw *awaitLease
	if !errors.As(err, &aw) {
		return p.pause(ctx)
	}
	d, ok := p.w.PauseUntil(time.Now(), deadlineOf(ctx), aw.end)
	return ok && sleepCtx(ctx, d)
}

// forward says whether the call is forwarded to owner at addr, after the
// pause CallWait asks for; false: the call gets p.last, never nil (CallWait
// forwards a call at once until a forward of it was refused).
func (p *callPace) forward(ctx context.Context, owner, addr string) bool {
	d, ok := p.w.Forward(time.Now(), deadlineOf(ctx), owner, addr)
	return ok && (d == 0 || sleepCtx(ctx, d))
}

// refused records a forward refused before the owner ran the call, or that
// never reached it.
func (p *callPace) refused(owner, addr string, err error) {
	p.w.Refused(owner, addr)
	p.last = err
}

func deadlineOf(ctx context.Context) time.Time {
	dl, _ := ctx.Deadline()
	return dl
}

// sleepCtx sleeps d; false if ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// mayWait says whether a call routed to a (not) decision waits for a new
// owner and is routed again (OwnerWait, cluster.CallWait): the owner's lease is gone but its
// absence is not yet judged (OWNER_SUSPECT), or this replica's own lease
// lapsed (LEASE_LAPSED). A forwarded call never waits (its forwarder does,
// and would give up on a peer silent for PeerFirstByte).
func (c *clusterState) mayWait(ctx context.Context, a cluster.Action, err error) bool {
	if err == nil || forwardedFrom(ctx) != "" {
		return false
	}
	return a == cluster.TakeOver && (errors.Is(err, errNotYet) || errors.Is(err, errLeaseLapsed))
}

func validSessionID(id string) bool { return checkSessionID(id) == nil }

// requestIDs returns the session and job ids of a session method's request,
// decoded or still raw (see wirecodec.RawHandler).
func requestIDs(req any, mi *methodInfo) (sid, jid string, err error) {
	raw, ok := req.(*wirecodec.RawMessage)
	if !ok {
		return fieldString(req, mi.sessionField), fieldString(req, mi.jobField), nil
	}
	var job protowire.Number
	if mi.jobField != nil {
		job = mi.jobField.Number()
	}
	if sid, jid, err = wirecodec.ScanIDs(raw.Bytes, mi.sessionField.Number(), job); err != nil {
		return "", "", status.Errorf(codes.Internal, "grpc: error unmarshalling request: %v", err)
	}
	return sid, jid, nil
}

// forwardUnary sends a unary call to the session's owner. retry says the
// call is to be routed again: the owner refused it before running the
// handler (see forwardOutcome), or it never reached the owner (not sent,
// or no response header within PeerFirstByte: see cluster_forward.go).
func (c *clusterState) forwardUnary(ctx context.Context, method string, mi *methodInfo, req any, id, owner, addr string, attempt int) (_ any, retry bool, _ error) {
	start := time.Now()
	cc, err := c.peer(addr)
	if err != nil {
		c.owners.Forget(id)
		return nil, false, status.Errorf(codes.Unavailable, "cannot reach session owner %s at %s: %v", owner, addr, err)
	}
	kick(cc)
	// The owner's answer is passed on as it came (wirecodec.RawMessage).
	reply := &wirecodec.RawMessage{}
	caller, digest := callerFrom(ctx), bodyDigest(req)
	at := c.newUnaryAttempt(c.outgoing(ctx, method, caller, owner, id, digest), addr, cc)
	defer at.end()
	// The owner sends its hints in its header (at once: the transport's
	// reader reports it to at) and its trailer; the trailer comes with
	// every answer, an error too. Invoke, not NewStream: grpc-go starts a
	// goroutine per stream to watch its context, except for its own unary
	// calls.
	var trl metadata.MD
	err = cc.Invoke(at.ctx, method, req, reply, grpc.Trailer(&trl), grpc.ForceCodecV2(c.codec))
	c.m.forwardSeconds.Observe(time.Since(start).Seconds())
	if why, ok := at.unreachable(ctx, err); ok {
		c.owners.Forget(id)
		c.m.forwardRetries.WithLabelValues(why).Inc()
		c.m.forwards.WithLabelValues(method, codes.Unavailable.String()).Inc()
		return nil, true, c.unreachableError(err, why, owner, addr)
	}
	c.m.forwards.WithLabelValues(method, status.Code(err).String()).Inc()
	if retry = c.forwardOutcome(id, owner, err, attempt, trl); retry {
		c.m.forwardRetries.WithLabelValues("refused").Inc()
		return nil, true, c.peerError(err, owner, addr)
	}
	h := c.relayHints(trl, owner, addr)
	_ = grpc.SetHeader(ctx, h)
	_ = grpc.SetTrailer(ctx, h)
	if err != nil {
		return nil, false, c.peerError(err, owner, addr)
	}
	return reply, false, nil
}

// unreachableError is the answer of a forward that did not reach the owner
// (retryable: once the owner's lease expires another replica takes the
// session over).
func (c *clusterState) unreachableError(err error, why, owner, addr string) error {
	msg := status.Convert(err).Message()
	if why == "no_first_byte" {
		msg = fmt.Sprintf("no answer within %v", c.cfg.PeerFirstByte)
	}
	return gatewayStatus(codes.Unavailable, "OWNER_UNREACHABLE",
		fmt.Sprintf("session owner %s at %s did not answer (%s): retry; once its lease expires another replica takes the session over", owner, addr, msg),
		map[string]string{"owner": owner, "owner_addr": addr})
}

// forwardOutcome applies cluster.After to a forward's answer: it drops the
// cached owner unless the owner served the call and named itself, and says
// whether to route the call again.
func (c *clusterState) forwardOutcome(id, owner string, err error, attempt int, md ...metadata.MD) (retry bool) {
	hint := ""
	for _, m := range md {
		if v := m.Get(MetadataOwner); len(v) > 0 {
			hint = v[0]
			break
		}
	}
	r := replyOf(err)
	keep, retry := cluster.After(r, owner, hint, attempt)
	if !keep {
		c.owners.Forget(id)
	}
	// Past the first attempt, the caller's loop paces further ones
	// (againTo): a refusal is routed again within the caller's wait.
	return retry || r == cluster.Refused
}

// replyOf classifies a peer's answer to a forwarded call.
func replyOf(err error) cluster.Reply {
	if err == nil {
		return cluster.Served
	}
	st := status.Convert(err)
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == "sessiongate" {
			switch info.GetReason() {
			case "NOT_OWNER", "DRAINING", "OWNER_SUSPECT", "LEASE_LAPSED":
				// All are answered by the peer's routing, before
				// the handler: see route and routeError.
				return cluster.Refused
			}
		}
	}
	switch st.Code() {
	case codes.Unavailable, codes.NotFound, codes.Unauthenticated, codes.Internal, codes.Unknown:
		return cluster.Failed
	}
	return cluster.Served
}

// peerError passes a status from the owner through; a failure to reach the
// owner becomes UNAVAILABLE naming it (its lease has not expired yet: a
// retry after the lease TTL is served by the replica that takes over).
func (c *clusterState) peerError(err error, owner, addr string) error {
	st := status.Convert(err)
	// CANCELED without details: the connection was closed under the call
	// (dropPeer: the owner stopped answering).
	if (st.Code() == codes.Unavailable || st.Code() == codes.Canceled) && len(st.Details()) == 0 {
		return gatewayStatus(codes.Unavailable, "OWNER_UNREACHABLE",
			fmt.Sprintf("session owner %s at %s did not answer (%s): retry; once its lease expires another replica takes the session over", owner, addr, st.Message()),
			map[string]string{"owner": owner, "owner_addr": addr})
	}
	return err
}

// clusterStream is clusterUnary for streams: it reads the first request to
// learn the session id, then serves (replaying that message to the
// handler) or forwards the whole stream.
func (g *Gateway) clusterStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	mi := methodOf(info.FullMethod)
	if mi == nil || mi.sessionField == nil {
		return handler(srv, ss)
	}
	first := mi.in.New().Interface()
	if err := ss.RecvMsg(first); err != nil {
		if errors.Is(err, io.EOF) {
			return status.Error(codes.InvalidArgument, "the stream ended before its request")
		}
		return err
	}
	ctx := ss.Context()
	id := fieldString(first, mi.sessionField)
	if err := g.cluster.checkProof(ctx, info.FullMethod, id, first); err != nil {
		return err
	}
	if err := checkSessionHeader(ctx, id); err != nil {
		return err
	}
	rs := &replayStream{ServerStream: ss, first: first}
	c := g.cluster
	if c == nil || readOnlyMethods[info.FullMethod] || !validSessionID(id) {
		return handler(srv, rs)
	}
	pace := c.newPace()
	for attempt := 0; ; attempt++ {
		a, addr, owner, err := c.routing(ctx, id, attempt == 0, isWrite(info.FullMethod, mi.serverStreams))
		if c.mayWait(ctx, a, err) && pace.pause(ctx) || a == cluster.Await && pace.until(ctx, err) {
			continue
		}
		switch a {
		case cluster.Serve, cluster.NotFound:
			if err != nil {
				return c.routeError(a, id, owner, addr, err)
			}
			if a == cluster.Serve {
				if forwardedFrom(ctx) == "" {
					_ = ss.SetHeader(c.selfHints)
				} else {
					sendOwnerHeader(ctx, ss, c.selfHints) // see clusterUnary
				}
				ss.SetTrailer(c.selfHints)
				if err := c.prepareLocal(ctx, id, fieldString(first, mi.jobField)); err != nil {
					return err
				}
			}
			return handler(srv, rs)
		case cluster.Forward:
			if !pace.forward(ctx, owner, addr) {
				return pace.last
			}
			retry, err := c.forwardStream(ss, info.FullMethod, mi, first, id, owner, addr, attempt)
			if !retry {
				return err
			}
			pace.refused(owner, addr, err)
			continue
		}
		return c.routeError(a, id, owner, addr, err)
	}
}

// replayStream hands the first request, already read, to the handler.
type replayStream struct {
	grpc.ServerStream
	first proto.Message
	used  bool
}

func (r *replayStream) RecvMsg(m any) error {
	if !r.used {
		r.used = true
		pm, ok := m.(proto.Message)
		if !ok {
			return status.Error(codes.Internal, "internal error")
		}
		proto.Merge(pm, r.first)
		return nil
	}
	return r.ServerStream.RecvMsg(m)
}

// forwardStream relays a whole stream to the session's owner. retry says
// the owner refused it before running the handler and nothing was relayed
// to the caller (a stream whose caller sends more than one message is
// never retried: the pump has consumed them).
func (c *clusterState) forwardStream(ss grpc.ServerStream, method string, mi *methodInfo, first proto.Message, id, owner, addr string, attempt int) (retry bool, err error) {
	defer func() {
		if !retry {
			c.m.forwards.WithLabelValues(method, status.Code(err).String()).Inc()
		}
	}()
	cc, err := c.peer(addr)
	if err != nil {
		c.owners.Forget(id)
		return false, status.Errorf(codes.Unavailable, "cannot reach session owner %s at %s: %v", owner, addr, err)
	}
	kick(cc)
	caller, digest := callerFrom(ss.Context()), bodyDigest(first)
	at := c.newAttempt(c.outgoing(ss.Context(), method, caller, owner, id, digest), addr)
	defer at.end()
	ctx := at.ctx
	desc := &grpc.StreamDesc{ServerStreams: mi.serverStreams, ClientStreams: mi.clientStreams}
	// unsent is the answer of a stream that did not reach the owner: it is
	// routed again (nothing was relayed to the caller yet).
	stopCut := context.AfterFunc(c.relaysEnd, func() { at.cancel(errRelayCut) })
	defer stopCut()
	var cursor uint64 // event_seq of the last message relayed (WatchJob)
	seqField := mi.out.Descriptor().Fields().ByName("event_seq")
	unsent := func(err error) (bool, error) {
		if errors.Is(context.Cause(at.ctx), errRelayCut) {
			return false, relayCutStatus(id, cursor)
		}
		why, ok := at.unreachable(ss.Context(), err)
		if !ok {
			c.owners.Forget(id)
			return false, c.peerError(err, owner, addr)
		}
		c.owners.Forget(id)
		c.m.forwardRetries.WithLabelValues(why).Inc()
		retry = !mi.clientStreams
		return retry, c.unreachableError(err, why, owner, addr)
	}
	cs, err := cc.NewStream(ctx, desc, method)
	if err != nil {
		return unsent(err)
	}
	if err := cs.SendMsg(first); err != nil && !errors.Is(err, io.EOF) {
		return unsent(err)
	}
	if mi.clientStreams {
		// The pump ends when the caller half-closes or the stream ends
		// (which this handler's return brings about): grpc-go then fails
		// the blocked RecvMsg.
		go func() {
			for {
				m := mi.in.New().Interface()
				if err := ss.RecvMsg(m); err != nil {
					_ = cs.CloseSend()
					return
				}
				if err := cs.SendMsg(m); err != nil {
					return
				}
			}
		}()
	} else if err := cs.CloseSend(); err != nil {
		return unsent(err)
	}
	// The header goes to the caller with the first message (or the end),
	// so that a refused stream can still be sent elsewhere.
	hdr, herr := cs.Header() // nil when the stream ended first: RecvMsg says how
	if herr != nil && at.droppedBeforeHeader(herr) {
		return unsent(herr) // its connection closed before the owner took it
	}
	if !at.answered() {
		// No header within the bound: the stream was cancelled.
		return unsent(cs.RecvMsg(mi.out.New().Interface()))
	}
	defer c.watchPeer(addr, cc)()
	sentHeader := false
	sendHeader := func() {
		if sentHeader {
			return
		}
		sentHeader = true
		_ = ss.SetHeader(c.relayHints(hdr, owner, addr))
	}
	for relayed := 0; ; relayed++ {
		m := mi.out.New().Interface()
		if err := cs.RecvMsg(m); err != nil {
			if errors.Is(err, io.EOF) {
				err = nil
			}
			if errors.Is(context.Cause(at.ctx), errRelayCut) {
				sendHeader()
				return false, relayCutStatus(id, cursor)
			}
			retry := c.forwardOutcome(id, owner, err, attempt, hdr, cs.Trailer()) && relayed == 0 && !mi.clientStreams
			if retry {
				return true, c.peerError(err, owner, addr)
			}
			sendHeader()
			t := ownerHints(cs.Trailer())
			t.Set(MetadataServedBy, c.self)
			ss.SetTrailer(t)
			if err != nil {
				return false, c.peerError(err, owner, addr)
			}
			return false, nil
		}
		sendHeader()
		if err := ss.SendMsg(m); err != nil {
			return false, err
		}
		if seqField != nil && seqField.Kind() == protoreflect.Uint64Kind {
			cursor = m.ProtoReflect().Get(seqField).Uint()
		}
	}
}

// errRelayCut is the cause of a relayed stream cut at the end of the lame
// duck.
var errRelayCut = errors.New("cluster: this replica is shutting down")

// relayCutStatus is the answer of a stream cut at the end of the lame
// duck: retryable, with the cursor to resume from (for WatchJob: the last
// event_seq relayed, also as ErrorInfo from_event_seq).
func relayCutStatus(id string, cursor uint64) error {
	seq := strconv.FormatUint(cursor, 10)
	return gatewayStatus(codes.Unavailable, "DRAINING",
		"this replica is shutting down and cut the stream it relayed for session "+id+": call again (another replica answers); WatchJob from event_seq "+seq,
		map[string]string{"from_event_seq": seq})
}
