package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/sessiongate/sessiongate/gateway/peerauth"
	"github.com/sessiongate/sessiongate/gateway/peerauth/peertls"
	"github.com/sessiongate/sessiongate/gateway/wirecodec"
)

// The forwarding proof of a call between replicas (gateway/peerauth): the
// forwarder signs destination, caller, method, session and a digest of the
// request with a one-time nonce; the owner checks it against the call it
// received, once the request's session id and bytes are known (clusterUnary
// after decoding the ids, clusterStream after the first message). authFunc
// only parses the hop headers and lets through, to those two checks, calls
// of methods a peer forwards.

// peerProofs signs and verifies forwarding proofs and counts refusals.
type peerProofs struct {
	auth    *peerauth.Auth
	refused *prometheus.CounterVec // reason
}

func newPeerProofs(secret, self string, reg prometheus.Registerer) (*peerProofs, error) {
	a, err := peerauth.New(peerauth.Config{Secret: []byte(secret), Self: self})
	if err != nil {
		return nil, err
	}
	p := &peerProofs{auth: a, refused: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sessiongate_cluster_forward_proofs_refused_total",
		Help: "Forwarded calls refused because their forwarding proof did not hold, by reason (replay: a proof used before; mismatch: another session, body, caller, method, sender or destination, or a forgery; expired; self: a proof naming this replica as sender; no_peer_cert: not over mutual TLS; …).",
	}, []string{"reason"})}
	for _, r := range append(append([]string(nil), peerauth.Reasons...), reasonNoPeerCert) {
		p.refused.WithLabelValues(r)
	}
	cached := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sessiongate_cluster_forward_nonces",
		Help: "Nonces of accepted forwarding proofs remembered (until their proofs expire) to refuse replays."},
		func() float64 { return float64(a.Nonces()) })
	for _, c := range []prometheus.Collector{p.refused, cached} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("gateway: register forwarding proof metrics: %w", err)
		}
	}
	return p, nil
}

// pendingProof is a forwarded call's hop headers, the value of
// forwardedKey in its context, checked by checkProof.
type pendingProof struct{ from, caller, token string }

// forwardable says whether peers ever forward calls of method: session
// methods that are routed (not the read-only ones). A call of any other
// method carrying hop headers is refused by authFunc.
func forwardable(method string) bool {
	mi := methodOf(method)
	return mi != nil && mi.sessionField != nil && !readOnlyMethods[method]
}

// bodyDigest is the request digest of a forwarding proof: of the bytes as
// they travel for a unary call (a *wirecodec.RawMessage on both replicas), of the
// deterministic encoding of a stream's first message (decoded on both).
func bodyDigest(m any) [32]byte {
	switch v := m.(type) {
	case *wirecodec.RawMessage:
		return peerauth.Digest(v.Bytes)
	case proto.Message:
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(v)
		if err != nil {
			return [32]byte{} // matches no proof: a forwarder could not encode it either
		}
		return peerauth.Digest(b)
	}
	return [32]byte{}
}

// signForward returns x-sessiongate-forward-auth for a call of caller to
// method on session id, with request digest, sent to the replica to.
func (c *clusterState) signForward(to, caller, method, id string, digest [32]byte) string {
	return c.proofs.auth.Sign(peerauth.Claims{To: to, Caller: caller, Method: method, Session: id, Digest: digest}, time.Now())
}

// checkProof verifies the forwarding proof of a forwarded call (nothing to
// do for one that was not forwarded) against its session id and request.
func (c *clusterState) checkProof(ctx context.Context, method, id string, req any) error {
	p, ok := ctx.Value(forwardedKey{}).(*pendingProof)
	if !ok {
		return nil
	}
	if c == nil {
		return status.Error(codes.Unauthenticated, "forwarding metadata (x-sessiongate-forward*) is accepted only from cluster peers")
	}
	err := c.proofs.auth.Verify(p.token, peerauth.Claims{From: p.from, Caller: p.caller, Method: method, Session: id, Digest: bodyDigest(req)}, time.Now())
	if err == nil {
		return nil
	}
	reason := peerauth.ReasonOf(err)
	c.proofs.refused.WithLabelValues(reason).Inc()
	c.m.forgedForwards.Inc()
	// The access log records the refusal (its status names the reason):
	// no second line here for a flood of forgeries to multiply.
	return gatewayStatus(codes.Unauthenticated, "FORWARD_REFUSED", "forwarding metadata refused: "+err.Error(), map[string]string{"reason": reason})
}

// reasonNoPeerCert labels forwarded calls refused because they did not come
// over mutual TLS (peer TLS configured).
const reasonNoPeerCert = "no_peer_cert"

// peerTransportOK says whether a forwarded call came over a transport peers
// may use: with peer mTLS configured, a TLS connection whose client
// certificate the cluster's CA signed.
func (c *clusterState) peerTransportOK(ctx context.Context) error {
	if c.cfg.PeerTLS != nil && !peertls.Verified(ctx) {
		return errors.New("forwarded calls are accepted only over mutual TLS with a certificate of the cluster's CA")
	}
	return nil
}

// peerServerOptions are the gRPC server's options for peer TLS: the port
// then accepts TLS beside plaintext (see peertls).
func peerServerOptions(cc *ClusterConfig) []grpc.ServerOption {
	if cc == nil || cc.PeerTLS == nil {
		return nil
	}
	return []grpc.ServerOption{grpc.Creds(cc.PeerTLS.ServerCredentials())}
}
