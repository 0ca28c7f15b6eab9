package main

import (
	"context"
	"crypto/tls"
	"errors"
	"os"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/sessiongate/sessiongate/gateway/cluster/clustertest"
	"github.com/sessiongate/sessiongate/gateway/peerauth"
	"github.com/sessiongate/sessiongate/gateway/peerauth/peertls/peertlstest"
	sessiongatev1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
)

// TestClusterPeerMTLS runs two replicas (real processes, real
// redis-server) with --peer-tls-cert/-key/-ca, certificates made by the
// test: a call through gw-2 for a session of gw-1 is forwarded over mutual
// TLS and served; a forwarded call with a valid forwarding proof is refused
// when it comes in plaintext or over TLS without a client certificate, and
// served over TLS with one; a certificate of another CA does not get
// through the handshake; rotated certificate files are picked up without a
// restart.
func TestClusterPeerMTLS(t *testing.T) {
	ctx := testContext(t, 90*time.Second)
	ca, err := peertlstest.NewCA("sessiongate cluster")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files, serial1, err := ca.WriteFiles(dir, "replica")
	if err != nil {
		t.Fatal(err)
	}
	c, err := clustertest.Start(ctx, clustertest.Options{Replicas: 2, LeaseTTL: time.Second,
		Args: []string{"--peer-tls-cert", files.Cert, "--peer-tls-key", files.Key, "--peer-tls-ca", files.CA}})
	if errors.Is(err, clustertest.ErrNoBinary) {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%v (CI=true: apt-get install -y redis-server)", err)
		}
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, r := range c.Replicas {
				t.Logf("--- %s log (tail):\n%s", r.Instance, tail(r.Log(), 4000))
			}
		}
		c.Close()
	})
	gw1 := sessiongatev1.NewSessionGatewayClient(dial(t, c.Replicas[0].Addr))
	gw2 := sessiongatev1.NewSessionGatewayClient(dial(t, c.Replicas[1].Addr))
	sid := openOn(t, ctx, gw1)

	// Callers keep plaintext; the replicas forward over mutual TLS.
	forwarded := func(what string) {
		t.Helper()
		var hdr metadata.MD
		if _, err := echo(ctx, gw2, sid, grpc.Header(&hdr)); err != nil {
			t.Fatalf("%s: RunJob through gw-2 for gw-1's session: %v", what, err)
		}
		if by, owner := hdr.Get("x-sessiongate-served-by"), hdr.Get("x-sessiongate-owner"); len(by) != 1 || by[0] != "gw-2" || len(owner) != 1 || owner[0] != "gw-1" {
			t.Fatalf("%s: served by %v, owner %v; want gw-2 forwarding to gw-1", what, by, owner)
		}
	}
	forwarded("with certificates")

	// A forwarded call as a peer would send it, with a valid proof (this
	// test holds the cluster secret), over each kind of connection.
	signer, err := peerauth.New(peerauth.Config{Secret: []byte(clustertest.Secret), Self: "gw-2"})
	if err != nil {
		t.Fatal(err)
	}
	req := &sessiongatev1.RunJobRequest{SessionId: sid, Agent: "echo"}
	body, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	asPeer := func(creds credentials.TransportCredentials) (metadata.MD, error) {
		tok := signer.Sign(peerauth.Claims{To: "gw-1", Caller: "anonymous", Method: sessiongatev1.SessionGateway_RunJob_FullMethodName,
			Session: sid, Digest: peerauth.Digest(body)}, time.Now())
		md := metadata.Pairs("x-sessiongate-forwarded-by", "gw-2", "x-sessiongate-forwarded-caller", "anonymous", "x-sessiongate-forward-auth", tok)
		cc, err := grpc.NewClient(c.Replicas[0].Addr, grpc.WithTransportCredentials(creds))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		cctx, cancel := context.WithTimeout(metadata.NewOutgoingContext(ctx, md), 10*time.Second)
		defer cancel()
		var trl metadata.MD
		_, err = sessiongatev1.NewSessionGatewayClient(cc).RunJob(cctx, req, grpc.Trailer(&trl))
		return trl, err
	}
	if _, err := asPeer(insecure.NewCredentials()); status.Code(err) != codes.Unauthenticated || errorReason(err) != "FORWARD_REFUSED" {
		t.Fatalf("forwarded call in plaintext: %v, want UNAUTHENTICATED FORWARD_REFUSED", err)
	}
	noCert, err := ca.ClientConfig(false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := asPeer(credentials.NewTLS(noCert)); status.Code(err) != codes.Unauthenticated || errorReason(err) != "FORWARD_REFUSED" {
		t.Fatalf("forwarded call over TLS without a client certificate: %v, want UNAUTHENTICATED FORWARD_REFUSED", err)
	}
	withCert, err := ca.ClientConfig(true)
	if err != nil {
		t.Fatal(err)
	}
	if trl, err := asPeer(credentials.NewTLS(withCert)); err != nil {
		t.Fatalf("forwarded call over mutual TLS with a valid proof: %v", err)
	} else if got := trl.Get("x-sessiongate-served-by"); len(got) != 1 || got[0] != "gw-1" {
		t.Fatalf("forwarded call served by %v, want gw-1", got)
	}
	other, _ := peertlstest.NewCA("another CA")
	foreign, err := other.ClientConfig(true)
	if err != nil {
		t.Fatal(err)
	}
	// It trusts the cluster and presents another CA's certificate whatever
	// CAs the server asks for.
	foreign.RootCAs = withCert.RootCAs
	mallory := foreign.Certificates[0]
	foreign.Certificates = nil
	foreign.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &mallory, nil }
	if _, err := asPeer(credentials.NewTLS(foreign)); status.Code(err) != codes.Unavailable {
		t.Fatalf("forwarded call with another CA's certificate: %v, want UNAVAILABLE (handshake refused)", err)
	}

	// Rotation: new certificate files (same CA) are served on the next
	// handshake, and forwarding goes on.
	_, serial2, err := ca.WriteFiles(dir, "replica")
	if err != nil {
		t.Fatal(err)
	}
	served := func() string {
		d := tls.Dialer{Config: noCert}
		conn, err := d.DialContext(ctx, "tcp", c.Replicas[0].Addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return conn.(*tls.Conn).ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	if s := served(); s != serial1.String() && s != serial2.String() {
		t.Fatalf("gw-1 serves certificate serial %s, want %s or %s", s, serial1, serial2)
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for served() != serial2.String() {
		select {
		case <-ctx.Done():
			t.Fatalf("gw-1 still serves certificate %s after rotation to %s", served(), serial2)
		case <-tick.C:
		}
	}
	forwarded("after rotation")
}
