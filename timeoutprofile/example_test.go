package timeoutprofile_test

import (
	"context"
	"fmt"
	"log"
	"net"
	"os"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/retry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	timeoutprofilev1 "github.com/sessiongate/sessiongate/gen/timeoutprofile/v1"
	"github.com/sessiongate/sessiongate/timeoutprofile"
)

// slowHealth is a third-party service: the standard gRPC health service,
// which declares no timeout options, with a Check that waits until its
// context ends.
type slowHealth struct {
	healthpb.UnimplementedHealthServer
}

func (slowHealth) Check(ctx context.Context, _ *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// A grpc-go service adopts timeout profiles with an Enforcer and its
// interceptors; the client adds its own interceptor and asks for a budget
// per call.
func Example() {
	// Server side. Health has no (timeoutprofile.v1.profile) options, so it
	// is mapped; its heartbeat budget is shortened for the example.
	tp, err := timeoutprofile.New(
		timeoutprofile.WithProfile(timeoutprofile.Profile{Name: "heartbeat", Default: 50 * time.Millisecond, Min: 10 * time.Millisecond, Max: 100 * time.Millisecond}),
		timeoutprofile.WithMethodProfile("/grpc.health.v1.Health/*", "heartbeat"),
	)
	if err != nil {
		log.Fatal(err)
	}
	srv := grpc.NewServer(
		grpc.ChainUnaryInterceptor(tp.UnaryServerInterceptor()),
		grpc.ChainStreamInterceptor(tp.StreamServerInterceptor()))
	healthpb.RegisterHealthServer(srv, slowHealth{})
	timeoutprofilev1.RegisterTimeoutProfileServiceServer(srv, timeoutprofile.NewService(tp))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	defer func() { srv.Stop(); <-served }()

	// Client side: the standard profiles (heartbeat: 5 s, 1–30 s).
	ctp, err := timeoutprofile.New(timeoutprofile.WithMethodProfile("/grpc.health.v1.Health/*", "heartbeat"))
	if err != nil {
		log.Fatal(err)
	}
	conn, err := grpc.NewClient(lis.Addr().String(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithChainUnaryInterceptor(ctp.UnaryClientInterceptor()),
		grpc.WithChainStreamInterceptor(ctp.StreamClientInterceptor()))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Ask for 2 s: the client sends x-timeout-ms: 2000 with a 2 s deadline;
	// the server clamps it to its 100 ms maximum, and its budget runs out.
	_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}, timeoutprofile.CallTimeout(2*time.Second))
	fmt.Println(status.Code(err))
	if te, ok := timeoutprofile.FromError(err); ok {
		fmt.Println(te.GetProfileName(), te.GetLimit(), te.GetConfiguredTimeoutMs(), te.GetService(), te.GetMethod())
	}

	r, err := timeoutprofilev1.NewTimeoutProfileServiceClient(conn).ResolveProfile(ctx,
		&timeoutprofilev1.ResolveProfileRequest{FullMethod: "/grpc.health.v1.Health/Check"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(r.GetSource(), r.GetReason())
	// Output:
	// DeadlineExceeded
	// heartbeat unary 100 grpc.health.v1.Health Check
	// PROFILE_SOURCE_CONFIG configuration maps /grpc.health.v1.Health/* to "heartbeat"
}

func ExampleProfile_Clamp() {
	p := timeoutprofile.Profile{Name: "heartbeat", Default: 5 * time.Second, Min: time.Second, Max: 30 * time.Second}
	for _, req := range []time.Duration{200 * time.Millisecond, 10 * time.Second, time.Minute, 0} {
		d, rule := p.Clamp(req)
		fmt.Println(req, "→", d, rule)
	}
	// Output:
	// 200ms → 1s below_min
	// 10s → 10s none
	// 1m0s → 30s above_max
	// 0s → 5s zero_not_infinite
}

// The global layer comes from the environment and the file it names; the
// JSON printed is what `gateway profiles` shows.
func ExampleLoadGlobal() {
	env := map[string]string{"TIMEOUTPROFILE_HEARTBEAT_DEFAULT_MS": "2000"}
	cfg, err := timeoutprofile.LoadGlobal(func(k string) string { return env[k] }) // os.Getenv in a program
	if err != nil {
		log.Fatal(err)
	}
	for _, p := range cfg.Profiles() {
		if p.GetProfileName() == "heartbeat" {
			out, _ := timeoutprofile.MarshalProfiles([]*timeoutprofilev1.TimeoutProfile{p})
			os.Stdout.Write(out)
		}
	}
	// Output:
	// [
	//   {
	//     "profile_name": "heartbeat",
	//     "default_timeout_ms": 2000,
	//     "min_timeout_ms": 1000,
	//     "max_timeout_ms": 30000,
	//     "allow_infinite": false
	//   }
	// ]
}

func ExampleFromError() {
	// What a caller receives when a server's budget runs out.
	err := (&timeoutprofile.TimeoutError{
		Profile: "tool_call", Configured: time.Second, Elapsed: 1003 * time.Millisecond,
		Service: "acme.tools.v1.Tools", Method: "Run", Limit: timeoutprofile.LimitUnary,
	}).GRPCStatus().Err()
	fmt.Println(err)
	if te, ok := timeoutprofile.FromError(err); ok {
		fmt.Println(te.GetProfileName(), te.GetConfiguredTimeoutMs(), te.GetElapsedMs(), te.GetLimit())
	}
	// Output:
	// rpc error: code = DeadlineExceeded desc = timeout profile "tool_call" exceeded: 1000ms configured, 1003ms elapsed (unary)
	// tool_call 1000 1003 unary
}

func ExampleRetryServiceConfig() {
	sc, err := timeoutprofile.RetryServiceConfig(timeoutprofile.RetryPolicy{MaxAttempts: 3})
	if err != nil {
		log.Fatal(err)
	}
	// Use it with grpc.NewClient(target, grpc.WithDefaultServiceConfig(sc), ...).
	fmt.Println(sc)
	// Output:
	// {"methodConfig":[{"name":[{}],"retryPolicy":{"maxAttempts":3,"initialBackoff":"0.1s","maxBackoff":"5s","backoffMultiplier":2,"retryableStatusCodes":["DEADLINE_EXCEEDED","UNAVAILABLE"]}}],"retryThrottling":{"maxTokens":10,"tokenRatio":0.1}}
}

// go-grpc-middleware v2's retry interceptor, placed outside the timeout
// profile interceptor, retries timeouts with exponential backoff and
// jitter; each attempt passes through the profile interceptor and gets its
// own budget, all under the caller's deadline.
func Example_retryMiddleware() {
	tp, err := timeoutprofile.New()
	if err != nil {
		log.Fatal(err)
	}
	conn, err := grpc.NewClient("dns:///tools.example:443",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithChainUnaryInterceptor(
			retry.UnaryClientInterceptor(
				retry.WithCodes(codes.DeadlineExceeded, codes.Unavailable),
				retry.WithBackoff(retry.BackoffExponentialWithJitter(100*time.Millisecond, 0.2)),
				retry.WithMax(3)),
			tp.UnaryClientInterceptor()),
		grpc.WithChainStreamInterceptor(tp.StreamClientInterceptor()))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	// Fast-fail: later attempts get a shorter budget, e.g. by hand:
	//   client.Call(ctx, req, timeoutprofile.CallTimeout(budget/2))
}
