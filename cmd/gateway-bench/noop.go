package main

import (
	"context"
	"errors"
	"fmt"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"
)

// noopMethod is the full method name of the plain grpc-go baseline.
const noopMethod = "/bench.v1.Noop/Call"

// noopDesc is a hand-written service description, so the baseline needs no
// .proto: bench.v1.Noop/Call takes and returns google.protobuf.Empty.
var noopDesc = grpc.ServiceDesc{
	ServiceName: "bench.v1.Noop",
	HandlerType: (*any)(nil),
	Methods:     []grpc.MethodDesc{{MethodName: "Call", Handler: noopCall}},
	Metadata:    "cmd/gateway-bench (hand-written)",
}

// noopCall decodes the request into an Empty and answers an Empty. The
// server installs no interceptor, so interceptor is nil; it is honoured
// anyway, as generated handlers do.
func noopCall(_ any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
	in := new(emptypb.Empty)
	if err := dec(in); err != nil {
		return nil, err
	}
	if interceptor == nil {
		return &emptypb.Empty{}, nil
	}
	info := &grpc.UnaryServerInfo{FullMethod: noopMethod}
	return interceptor(ctx, in, info, func(context.Context, any) (any, error) { return &emptypb.Empty{}, nil })
}

// noopServer is a bare grpc.Server (no options, no interceptors) serving
// bench.v1.Noop on a loopback port.
type noopServer struct {
	srv    *grpc.Server
	addr   string
	served chan error // Serve's result
}

func startNoop() (*noopServer, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("no-op listener: %w", err)
	}
	s := &noopServer{srv: grpc.NewServer(), addr: lis.Addr().String(), served: make(chan error, 1)}
	s.srv.RegisterService(&noopDesc, struct{}{})
	go func() { s.served <- s.srv.Serve(lis) }()
	return s, nil
}

// stop stops the server at once (the bench has finished its calls) and waits
// for Serve to return.
func (s *noopServer) stop() error {
	s.srv.Stop()
	if err := <-s.served; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return fmt.Errorf("no-op server: %w", err)
	}
	return nil
}

// noopCaller returns a call of the no-op method over conn.
func noopCaller(conn *grpc.ClientConn) callFunc {
	in, out := &emptypb.Empty{}, &emptypb.Empty{}
	return func(ctx context.Context) error {
		return conn.Invoke(ctx, noopMethod, in, out)
	}
}
