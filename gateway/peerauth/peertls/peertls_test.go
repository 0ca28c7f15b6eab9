package peertls_test

import (
	"context"
	"crypto/tls"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/sessiongate/sessiongate/gateway/peerauth/peertls"
	"github.com/sessiongate/sessiongate/gateway/peerauth/peertls/peertlstest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// serve runs a health server with creds on loopback; verified is set by
// every call to peertls.Verified of its context.
func serve(t *testing.T, creds credentials.TransportCredentials, verified *atomic.Int32) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.Creds(creds), grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if peertls.Verified(ctx) {
			verified.Store(1)
		} else {
			verified.Store(-1)
		}
		return h(ctx, req)
	}))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(lis) }()
	t.Cleanup(func() { srv.Stop(); <-done })
	return lis.Addr().String()
}

func check(t *testing.T, addr string, creds credentials.TransportCredentials) error {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
	return err
}

// TestOnePort: plaintext callers, TLS callers without a certificate, and
// peers with a certificate of the cluster CA are served on one port; only
// the last are Verified; a certificate of another CA is refused.
func TestOnePort(t *testing.T) {
	ca, err := peertlstest.NewCA("cluster")
	if err != nil {
		t.Fatal(err)
	}
	files, _, err := ca.WriteFiles(t.TempDir(), "gw-1")
	if err != nil {
		t.Fatal(err)
	}
	pt, err := peertls.Load(files, peertls.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var verified atomic.Int32
	addr := serve(t, pt.ServerCredentials(), &verified)

	if err := check(t, addr, insecure.NewCredentials()); err != nil || verified.Load() != -1 {
		t.Fatalf("plaintext caller: %v, verified %d (want served, not verified)", err, verified.Load())
	}
	noCert, _ := ca.ClientConfig(false)
	if err := check(t, addr, credentials.NewTLS(noCert)); err != nil || verified.Load() != -1 {
		t.Fatalf("TLS caller without a certificate: %v, verified %d (want served, not verified)", err, verified.Load())
	}
	if err := check(t, addr, pt.ClientCredentials()); err != nil || verified.Load() != 1 {
		t.Fatalf("peer with the cluster's certificate: %v, verified %d (want served, verified)", err, verified.Load())
	}
	other, _ := peertlstest.NewCA("other")
	foreign, _, err := other.WriteFiles(t.TempDir(), "mallory")
	if err != nil {
		t.Fatal(err)
	}
	// mallory trusts the cluster's CA but holds a certificate of another.
	foreign.CA = files.CA
	mpt, err := peertls.Load(foreign, peertls.Options{})
	if err != nil {
		t.Fatal(err)
	}
	verified.Store(0)
	if err := check(t, addr, mpt.ClientCredentials()); err == nil || verified.Load() != 0 {
		t.Fatalf("peer with another CA's certificate: %v, verified %d (want refused at the handshake)", err, verified.Load())
	}
	// And a replica does not accept a server whose certificate another
	// CA signed.
	var v2 atomic.Int32
	mallorySrv, err := peertls.Load(peertls.Files{Cert: foreign.Cert, Key: foreign.Key, CA: files.CA}, peertls.Options{})
	if err != nil {
		t.Fatal(err)
	}
	maddr := serve(t, mallorySrv.ServerCredentials(), &v2)
	if err := check(t, maddr, pt.ClientCredentials()); err == nil {
		t.Fatal("a replica dialled a server with another CA's certificate")
	}
}

// TestReload: rotated certificate files are used for the next handshake,
// without a restart; a broken file keeps the previous certificate.
func TestReload(t *testing.T) {
	ca, _ := peertlstest.NewCA("cluster")
	dir := t.TempDir()
	files, serial1, err := ca.WriteFiles(dir, "gw-1")
	if err != nil {
		t.Fatal(err)
	}
	var reloadErrs atomic.Int32
	pt, err := peertls.Load(files, peertls.Options{ReloadEvery: time.Nanosecond, OnReloadError: func(error) { reloadErrs.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	var verified atomic.Int32
	addr := serve(t, pt.ServerCredentials(), &verified)
	served := func() string {
		cfg, _ := ca.ClientConfig(false)
		c, err := tls.Dial("tcp", addr, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	if got := served(); got != serial1.String() {
		t.Fatalf("serial %s, want %s", got, serial1)
	}
	_, serial2, err := ca.WriteFiles(dir, "gw-1")
	if err != nil {
		t.Fatal(err)
	}
	if got := served(); got != serial2.String() {
		t.Fatalf("after rotation: serial %s, want the new %s", got, serial2)
	}
	if err := peertlstest.ReplaceFile(files.Key, []byte("not a key")); err != nil {
		t.Fatal(err)
	}
	if got := served(); got != serial2.String() || reloadErrs.Load() == 0 {
		t.Fatalf("after a broken key file: serial %s (want %s kept), reload errors %d", got, serial2, reloadErrs.Load())
	}
}

func TestLoadNeedsAllFiles(t *testing.T) {
	if _, err := peertls.Load(peertls.Files{Cert: "a", Key: "b"}, peertls.Options{}); err == nil {
		t.Fatal("Load without a CA succeeded")
	}
	if _, err := peertls.Load(peertls.Files{Cert: "/nonexistent", Key: "/nonexistent", CA: "/nonexistent"}, peertls.Options{}); err == nil {
		t.Fatal("Load of missing files succeeded")
	}
}
