package server

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sessiongate/sessiongate/gateway/directory"
)

// Helpers of the tests that run gateways in cluster mode in this process.

// testDirectoryKey is a fresh resume-token key, id k1.
func testDirectoryKey() string {
	var k [32]byte
	_, _ = rand.Read(k[:])
	return "k1:" + base64.StdEncoding.EncodeToString(k[:])
}

// serveReplica serves gw on lis and returns a connection to it. At cleanup
// it closes the connection, shuts gw down and waits for Serve (reporting
// either's error under name), then calls after: a replica's directory must
// outlive its gateway.
func serveReplica(t testing.TB, name string, gw *Gateway, lis net.Listener, after func()) *grpc.ClientConn {
	t.Helper()
	served := make(chan error, 1)
	go func() { served <- gw.Serve(lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := gw.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown %s: %v", name, err)
		}
		if err := <-served; err != nil {
			t.Errorf("Serve %s: %v", name, err)
		}
		after()
	})
	return conn
}

// leaseLoop runs Directory.Run until halted; it may be started again.
type leaseLoop struct {
	d    *directory.Directory
	stop context.CancelFunc
	done chan struct{}
}

func (l *leaseLoop) start() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	l.stop, l.done = cancel, done
	go func() {
		defer close(done)
		_ = l.d.Run(ctx)
	}()
}

// halt ends Run, which deletes the lease, and waits for it. Idempotent.
func (l *leaseLoop) halt() {
	if l.stop != nil {
		l.stop()
		<-l.done
		l.stop = nil
	}
}
