package server

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/sessiongate/sessiongate/gateway/arcpruntime"
	"github.com/sessiongate/sessiongate/gateway/upstream"
	sessiongatev1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// harness is a gateway over a reference runtime, both on loopback.
type harness struct {
	rt     *arcpruntime.Server
	gw     *Gateway
	addr   string
	admin  *httptest.Server
	client sessiongatev1.SessionGatewayClient
	conn   *grpc.ClientConn
	stop   func() // Shutdown + wait; idempotent, safe to call concurrently
}

type harnessOpts struct {
	runtime arcpruntime.Options
	config  func(*Config)
	setup   func(*Gateway)    // runs after New, before Serve
	dial    []grpc.DialOption // extra client options
}

func newHarness(t *testing.T, o harnessOpts) *harness { return newHarnessTB(t, o) }

func newHarnessTB(t testing.TB, o harnessOpts) *harness {
	t.Helper()
	rt := arcpruntime.NewTestServer(t, o.runtime)
	cfg := Config{
		InstanceID: "gw-test",
		Runtimes:   []Runtime{{Name: "default", URL: rt.URL()}},
		Upstream: upstream.Config{
			BackoffInitial: 5 * time.Millisecond,
			BackoffMax:     50 * time.Millisecond,
			InitTimeout:    2 * time.Second,
		},
		Registry: prometheus.NewRegistry(),
	}
	if o.config != nil {
		o.config(&cfg)
	}
	gw, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if o.setup != nil {
		o.setup(gw)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- gw.Serve(lis) }()
	admin := httptest.NewServer(gw.AdminHandler())
	conn, err := grpc.NewClient(lis.Addr().String(), append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, o.dial...)...)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{rt: rt, gw: gw, addr: lis.Addr().String(), admin: admin, conn: conn,
		client: sessiongatev1.NewSessionGatewayClient(conn)}
	var once sync.Once
	h.stop = func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = gw.Shutdown(ctx)
			if err := <-served; err != nil {
				t.Errorf("Serve: %v", err)
			}
			conn.Close()
			admin.Close()
		})
	}
	t.Cleanup(h.stop)
	return h
}

func ctxT(t testing.TB, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func bearer(ctx context.Context, token string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
}

func (h *harness) open(t *testing.T, ctx context.Context) string {
	t.Helper()
	resp, err := h.client.OpenSession(ctx, &sessiongatev1.OpenSessionRequest{ClientName: "test"})
	if err != nil {
		t.Fatalf("OpenSession: %v", err)
	}
	return resp.GetSessionId()
}

func (h *harness) httpStatus(t *testing.T, id, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", h.admin.URL+"/v1/sessions/"+id+"/status", nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := h.admin.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf [4096]byte
	n, _ := resp.Body.Read(buf[:])
	return resp.StatusCode, string(buf[:n])
}
