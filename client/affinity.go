package client

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/balancer/base"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
)

// AffinityPolicy is the name of the session-affine load balancing policy
// WithSessionAffinity installs (registered with grpc-go on import).
const AffinityPolicy = "sessiongate_session_affinity"

// RoundRobinPolicy is the load balancing policy New installs without
// WithSessionAffinity: round robin over the ready replicas, skipping those
// the silence bound found silent (registered with grpc-go on import).
const RoundRobinPolicy = "sessiongate_round_robin"

// Response metadata of a sessiongate cluster (see README, "Cluster").
const (
	ownerAddrKey = "x-sessiongate-owner-addr"
	servedByKey  = "x-sessiongate-served-by"
)

// WithSessionAffinity sends each call to its session's owner in a
// sessiongate cluster, so that calls are not forwarded between replicas:
// the owner is learned from the owner hint of earlier responses
// (x-sessiongate-owner-addr), else from the instance in the session id
// (s1.<instance>.…) once a response has said which replica that instance is
// (x-sessiongate-served-by). Calls without a session, or whose owner is not
// known or not ready, go to any ready replica, round robin; a replica that
// gets a call for a session it does not own forwards it. The target must
// resolve to every replica (dns:///…, or WithReplicas).
func WithSessionAffinity() Option {
	return func(o *options) { o.affinity = true }
}

// WithReplicas makes the client connect to these replica addresses
// (host:port) instead of resolving New's target, which may then be "".
func WithReplicas(addrs ...string) Option {
	return func(o *options) { o.replicas = append(o.replicas, addrs...) }
}

var resolverSeq atomic.Uint64

// dialTarget applies WithSessionAffinity and WithReplicas: the service
// config's load balancing policy and a static resolver.
func (o *options) dialTarget(target, sc string) (string, string, []grpc.DialOption, error) {
	var dial []grpc.DialOption
	policy := RoundRobinPolicy
	if o.affinity {
		policy = AffinityPolicy
	}
	m := map[string]any{}
	if sc != "" {
		if err := json.Unmarshal([]byte(sc), &m); err != nil {
			return "", "", nil, fmt.Errorf("client: service config: %w", err)
		}
	}
	m["loadBalancingConfig"] = []any{map[string]any{policy: map[string]any{}}}
	raw, err := json.Marshal(m)
	if err != nil {
		return "", "", nil, err
	}
	sc = string(raw)
	if len(o.replicas) > 0 {
		r := manual.NewBuilderWithScheme(fmt.Sprintf("sessiongate-replicas-%d", resolverSeq.Add(1)))
		st := resolver.State{}
		for _, a := range o.replicas {
			st.Addresses = append(st.Addresses, resolver.Address{Addr: a})
		}
		r.InitialState(st)
		dial = append(dial, grpc.WithResolvers(r))
		target = r.Scheme() + ":///replicas"
	}
	return target, sc, dial, nil
}

func init() {
	balancer.Register(base.NewBalancerBuilder(AffinityPolicy, affinityBuilder{affinity: true}, base.Config{HealthCheck: true}))
	balancer.Register(base.NewBalancerBuilder(RoundRobinPolicy, affinityBuilder{}, base.Config{HealthCheck: true}))
}

// owners is what the clients of this process have learned: session id →
// owner address, instance id → address. Bounded: reset when full.
var owners = struct {
	sync.Mutex
	session  map[string]string
	instance map[string]string
}{session: map[string]string{}, instance: map[string]string{}}

const maxLearned = 100_000

func learn(m map[string]string, k, v string) {
	owners.Lock()
	defer owners.Unlock()
	if len(m) >= maxLearned {
		clear(m)
	}
	m[k] = v
}

func lookup(m map[string]string, k string) (string, bool) {
	owners.Lock()
	defer owners.Unlock()
	v, ok := m[k]
	return v, ok
}

// affinityBuilder builds the pickers of both policies: with affinity, a
// session's calls go to its owner when known.
type affinityBuilder struct{ affinity bool }

func (b affinityBuilder) Build(info base.PickerBuildInfo) balancer.Picker {
	if len(info.ReadySCs) == 0 {
		return base.NewErrPicker(balancer.ErrNoSubConnAvailable)
	}
	p := &affinityPicker{affinity: b.affinity, byAddr: make(map[string]balancer.SubConn, len(info.ReadySCs))}
	for sc, sci := range info.ReadySCs {
		p.all = append(p.all, sc)
		p.addrs = append(p.addrs, sci.Address.Addr)
		p.byAddr[sci.Address.Addr] = sc
	}
	return p
}

// affinityPicker picks the owner's connection when it is ready and not
// silent (affinity), else the next ready one not silent, round robin.
type affinityPicker struct {
	affinity bool
	all      []balancer.SubConn
	addrs    []string // parallel to all
	byAddr   map[string]balancer.SubConn
	next     atomic.Uint32
}

func (p *affinityPicker) Pick(info balancer.PickInfo) (balancer.PickResult, error) {
	md, _ := metadata.FromOutgoingContext(info.Ctx)
	var sid string
	if v := md.Get(SessionMetadataKey); len(v) > 0 {
		sid = v[0]
	}
	a := attemptOf(info.Ctx)
	i := int(p.next.Add(1)) % len(p.all)
	if a != nil {
		// Skip the silent replicas, unless all are.
		for k := range len(p.all) {
			if j := (i + k) % len(p.all); !a.w.isSilent(p.addrs[j]) {
				i = j
				break
			}
		}
	}
	sc, addr := p.all[i], p.addrs[i]
	if p.affinity && sid != "" {
		if o, ok := p.ownerAddr(sid); ok && (a == nil || !a.w.isSilent(o)) {
			sc, addr = p.byAddr[o], o
		}
	}
	if a != nil {
		a.picked(addr)
	}
	return balancer.PickResult{SubConn: sc, Done: func(di balancer.DoneInfo) {
		if v := di.Trailer.Get(servedByKey); len(v) > 0 {
			learn(owners.instance, v[0], addr)
		}
		if v := di.Trailer.Get(ownerAddrKey); len(v) > 0 && sid != "" && v[0] != "" {
			learn(owners.session, sid, v[0])
		}
	}}, nil
}

// ownerAddr is the ready address of the session's owner, if known.
func (p *affinityPicker) ownerAddr(sid string) (string, bool) {
	if a, ok := lookup(owners.session, sid); ok {
		if _, ready := p.byAddr[a]; ready {
			return a, true
		}
	}
	if inst, ok := instanceOf(sid); ok {
		if a, ok := lookup(owners.instance, inst); ok {
			if _, ready := p.byAddr[a]; ready {
				return a, true
			}
		}
	}
	return "", false
}

// instanceOf is the instance in a session id s1.<instance>.<secret>.
func instanceOf(sid string) (string, bool) {
	rest, ok := strings.CutPrefix(sid, "s1.")
	if !ok {
		return "", false
	}
	inst, _, ok := strings.Cut(rest, ".")
	return inst, ok && inst != ""
}
