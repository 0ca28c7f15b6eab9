package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sessiongate/sessiongate/gateway/arcp"
	"github.com/sessiongate/sessiongate/gateway/upstream"
)

// The bare proxy is the floor of the two hops the gateway bridges: a bare
// grpc.Server (as section 2's) whose one unary method takes the job's input
// as raw JSON bytes, runs the echo job on a direct ARCP connection (as
// section 1's client does) and answers the result's raw bytes. It keeps no
// session table, converts nothing, checks nothing and runs no interceptor,
// so no gateway built from grpc-go and this ARCP client can cost less per
// call; what RunJob costs beyond it is the gateway's own.

// proxyMethod is the full method name of the bare proxy.
const proxyMethod = "/bench.v1.Proxy/Call"

// proxyDesc is a hand-written service description: bench.v1.Proxy/Call
// takes and returns google.protobuf.BytesValue. The registered
// implementation is the *proxyServer the handler forwards through.
var proxyDesc = grpc.ServiceDesc{
	ServiceName: "bench.v1.Proxy",
	HandlerType: (*any)(nil),
	Methods:     []grpc.MethodDesc{{MethodName: "Call", Handler: proxyCall}},
	Metadata:    "cmd/gateway-bench (hand-written)",
}

// proxyCall decodes the input and forwards it. The server installs no
// interceptor; one passed anyway is honoured, as generated handlers do.
func proxyCall(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
	in := new(wrapperspb.BytesValue)
	if err := dec(in); err != nil {
		return nil, err
	}
	p := srv.(*proxyServer)
	if interceptor == nil {
		return p.forward(ctx, in)
	}
	info := &grpc.UnaryServerInfo{Server: srv, FullMethod: proxyMethod}
	return interceptor(ctx, in, info, func(ctx context.Context, req any) (any, error) {
		return p.forward(ctx, req.(*wrapperspb.BytesValue))
	})
}

// proxyServer serves the bare proxy over a pool of direct ARCP connections,
// one call at a time on each.
type proxyServer struct {
	srv    *grpc.Server
	addr   string
	pool   chan *upstream.Conn // the idle connections
	conns  []*upstream.Conn    // all of them, for close
	served chan error          // Serve's result
}

// startProxy serves the bare proxy on a loopback port over conns, which it
// closes in stop.
func startProxy(conns []*upstream.Conn) (*proxyServer, error) {
	if len(conns) == 0 {
		return nil, errors.New("bare proxy: no ARCP connection")
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		closeARCP(conns)
		return nil, fmt.Errorf("bare proxy listener: %w", err)
	}
	p := &proxyServer{srv: grpc.NewServer(), addr: lis.Addr().String(), pool: make(chan *upstream.Conn, len(conns)), conns: conns, served: make(chan error, 1)}
	for _, c := range conns {
		p.pool <- c
	}
	p.srv.RegisterService(&proxyDesc, p)
	go func() { p.served <- p.srv.Serve(lis) }()
	return p, nil
}

// forward runs one echo job with in's bytes as input on an idle connection
// and answers the result's bytes. A caller that gives up while every
// connection is busy gets its context's error.
func (p *proxyServer) forward(ctx context.Context, in *wrapperspb.BytesValue) (*wrapperspb.BytesValue, error) {
	var c *upstream.Conn
	select {
	case c = <-p.pool:
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	defer func() { p.pool <- c }()
	acc, err := c.Submit(ctx, arcp.Submit{Agent: "echo", Input: json.RawMessage(in.GetValue())})
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "submit: %v", err)
	}
	term, err := c.Wait(ctx, acc.JobID)
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "wait: %v", err)
	}
	if term.Result == nil {
		return nil, status.Errorf(codes.Aborted, "job %s ended without a result", acc.JobID)
	}
	return &wrapperspb.BytesValue{Value: term.Result.Result}, nil
}

// stop stops the server at once (the bench has finished its calls), waits
// for Serve to return and closes the ARCP connections.
func (p *proxyServer) stop() error {
	p.srv.Stop()
	err := <-p.served
	closeARCP(p.conns)
	if err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return fmt.Errorf("bare proxy: %w", err)
	}
	return nil
}

// proxyCaller returns a call of the bare proxy over conn that expects the
// echo input back.
func proxyCaller(conn *grpc.ClientConn) callFunc {
	in := &wrapperspb.BytesValue{Value: []byte(echoInput)}
	return func(ctx context.Context) error {
		out := new(wrapperspb.BytesValue)
		if err := conn.Invoke(ctx, proxyMethod, in, out); err != nil {
			return fmt.Errorf("bare proxy: %w", err)
		}
		if string(out.GetValue()) != echoInput {
			return fmt.Errorf("bare proxy answered %q, want the echo input", out.GetValue())
		}
		return nil
	}
}

// startProxyCallers starts the bare proxy on n fresh direct ARCP
// connections to url, dials it the way the gateway is dialled (conns
// connections, window as -client-window) and returns n callers, spread over
// them as section 3's are, and a stop for all of it.
func startProxyCallers(ctx context.Context, url string, n, conns int, window int32) ([]callFunc, func() error, error) {
	upstreams, err := dialARCP(ctx, url, n)
	if err != nil {
		return nil, nil, err
	}
	p, err := startProxy(upstreams)
	if err != nil {
		return nil, nil, err
	}
	ccs, err := dialConns(ctx, p.addr, conns, window)
	if err != nil {
		return nil, nil, errors.Join(err, p.stop())
	}
	calls := make([]callFunc, n)
	for w := range calls {
		calls[w] = proxyCaller(ccs[w%len(ccs)])
	}
	return calls, func() error { closeConns(ccs); return p.stop() }, nil
}
