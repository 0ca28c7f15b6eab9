package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/sessiongate/sessiongate/gateway/server"
	"github.com/sessiongate/sessiongate/gateway/upstream"
	sessiongatev1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
)

// upstreamTemplate is cmd/gateway's upstream configuration with its flag
// defaults; the gateway and the direct ARCP client both use it.
func upstreamTemplate() upstream.Config {
	return upstream.Config{
		InitTimeout:    10 * time.Second,
		RequestTimeout: 30 * time.Second,
		BackoffMax:     30 * time.Second,
		MaxLiveJobs:    100,
		MaxFrameBytes:  16 << 20,
	}
}

// gatewayFeatures are the ARCP features the gateway requests when
// OpenSession names none; the direct client requests the same, so that
// the runtime holds the same session state behind both.
var gatewayFeatures = server.DefaultFeatures()

// gatewayServer is the production gateway (server.New, which installs the
// whole interceptor chain, timeout profiles included) serving gRPC on a
// loopback port.
type gatewayServer struct {
	gw     *server.Gateway
	addr   string
	served chan error // Serve's result
}

// startGateway assembles the gateway as cmd/gateway does, over the runtime
// child's listeners (the first is "default", the others runtimeName(i)),
// with session caps above what the bench opens and an idle timeout longer
// than the run. Logs go to logw (JSON at info level, as in production;
// io.Discard unless -v).
func startGateway(runtimeURLs []string, maxSessions int, logw io.Writer) (*gatewayServer, error) {
	log := slog.New(slog.NewJSONHandler(logw, &slog.HandlerOptions{Level: slog.LevelInfo}))
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	profiles, err := timeoutProfiles()
	if err != nil {
		return nil, err
	}
	gw, err := server.New(server.Config{
		InstanceID:           "bench",
		Runtimes:             runtimesOf(runtimeURLs),
		MaxSessions:          maxSessions,
		MaxSessionsPerCaller: maxSessions,
		IdleTimeout:          time.Hour,
		MaxInputBytes:        8 << 20,
		Upstream:             upstreamTemplate(),
		TimeoutProfiles:      profiles,
		Registry:             reg,
		Logger:               log,
	})
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = gw.Shutdown(context.Background()) // nothing is served yet: returns at once
		return nil, fmt.Errorf("gateway listener: %w", err)
	}
	g := &gatewayServer{gw: gw, addr: lis.Addr().String(), served: make(chan error, 1)}
	go func() { g.served <- gw.Serve(lis) }()
	return g, nil
}

// stop shuts the gateway down (closing every upstream session), hard after
// timeout, and waits for Serve to return.
func (g *gatewayServer) stop(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err := g.gw.Shutdown(ctx)
	if serr := <-g.served; serr != nil {
		err = errors.Join(err, fmt.Errorf("gateway Serve: %w", serr))
	}
	return err
}

// echoInput is the input of every echo job, through the gateway and direct.
const echoInput = `{"hello":"world"}`

func echoValue() *structpb.Value {
	v, err := structpb.NewValue(map[string]any{"hello": "world"})
	if err != nil {
		panic(err) // a constant input
	}
	return v
}

// runJobCaller calls RunJob(echo) on session id and checks the result.
func runJobCaller(cc *grpc.ClientConn, id string) callFunc {
	client := sessiongatev1.NewSessionGatewayClient(cc)
	req := &sessiongatev1.RunJobRequest{SessionId: id, Agent: "echo", Input: echoValue()}
	return func(ctx context.Context) error {
		resp, err := client.RunJob(ctx, req)
		if err != nil {
			return fmt.Errorf("RunJob: %w", err)
		}
		if resp.GetResult().GetStructValue().GetFields()["hello"].GetStringValue() != "world" {
			return fmt.Errorf("RunJob(echo) answered %v", resp.GetResult())
		}
		return nil
	}
}

// statusCaller calls GetSessionStatus on session id, in the BASIC view a
// balancer routes on, and expects it live.
func statusCaller(cc *grpc.ClientConn, id string) callFunc {
	client := sessiongatev1.NewSessionGatewayClient(cc)
	req := &sessiongatev1.GetSessionStatusRequest{SessionId: id, View: sessiongatev1.SessionStatusView_SESSION_STATUS_VIEW_BASIC}
	return func(ctx context.Context) error {
		resp, err := client.GetSessionStatus(ctx, req)
		if err != nil {
			return fmt.Errorf("GetSessionStatus: %w", err)
		}
		if resp.GetStatus() != sessiongatev1.SessionStatus_SESSION_STATUS_LIVE {
			return fmt.Errorf("GetSessionStatus: %v", resp.GetStatus())
		}
		return nil
	}
}

// runtimeName names the gateway's runtime on listener i of the child.
func runtimeName(i int) string {
	if i == 0 {
		return "default"
	}
	return "r" + strconv.Itoa(i)
}

func runtimesOf(urls []string) []server.Runtime {
	rts := make([]server.Runtime, len(urls))
	for i, u := range urls {
		rts[i] = server.Runtime{Name: runtimeName(i), URL: u}
	}
	return rts
}

// openSession opens one session through the gateway, on the default runtime.
func openSession(ctx context.Context, cc *grpc.ClientConn) (string, error) {
	return openSessionOn(ctx, cc, "")
}

// openSessionOn opens one session on the named runtime ("" = default).
func openSessionOn(ctx context.Context, cc *grpc.ClientConn, runtime string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resp, err := sessiongatev1.NewSessionGatewayClient(cc).OpenSession(ctx, &sessiongatev1.OpenSessionRequest{ClientName: "gateway-bench", Runtime: runtime})
	if err != nil {
		return "", fmt.Errorf("OpenSession: %w", err)
	}
	return resp.GetSessionId(), nil
}

// closeSession closes one session through the gateway.
func closeSession(ctx context.Context, cc *grpc.ClientConn, id string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := sessiongatev1.NewSessionGatewayClient(cc).CloseSession(ctx, &sessiongatev1.CloseSessionRequest{SessionId: id}); err != nil {
		return fmt.Errorf("CloseSession: %w", err)
	}
	return nil
}
