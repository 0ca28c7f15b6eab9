package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// accessLog writes one record per finished call ("finished call"), at the
// level logLevel gives its code, with the field names of go-grpc-middleware's
// logging interceptor, which the gateway used before (log queries keep
// working): protocol, grpc.component, grpc.service, grpc.method,
// grpc.method_type, peer.address, grpc.start_time, grpc.request.deadline,
// grpc.code, grpc.error and grpc.time_ms.
//
// It replaces that interceptor on the hot path because the library builds
// every field of a call (some 60 allocations for a RunJob, an eighth of the
// whole call's) before it knows the level, and most calls end OK, which is
// logged at DEBUG and off by default. Here nothing is built unless the level
// is enabled: a call that is not logged costs an Enabled check.
type accessLog struct {
	log  *slog.Logger
	skip map[string]bool // full method names never logged
}

func (a *accessLog) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if a.skip[info.FullMethod] {
		return handler(ctx, req)
	}
	start := time.Now()
	resp, err := handler(ctx, req)
	a.finished(ctx, info.FullMethod, "unary", start, err)
	return resp, err
}

func (a *accessLog) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if a.skip[info.FullMethod] {
		return handler(srv, ss)
	}
	start := time.Now()
	err := handler(srv, ss)
	typ := "bidi_stream"
	switch {
	case info.IsServerStream && !info.IsClientStream:
		typ = "server_stream"
	case info.IsClientStream && !info.IsServerStream:
		typ = "client_stream"
	}
	a.finished(ss.Context(), info.FullMethod, typ, start, err)
	return err
}

func (a *accessLog) finished(ctx context.Context, fullMethod, typ string, start time.Time, err error) {
	if errors.Is(err, io.EOF) {
		err = nil
	}
	code := status.Code(err)
	lvl := logLevel(code)
	if !a.log.Enabled(ctx, lvl) {
		return
	}
	elapsed := time.Since(start)
	service, method := splitMethod(fullMethod)
	attrs := make([]slog.Attr, 0, 12)
	attrs = append(attrs,
		slog.String("protocol", "grpc"),
		slog.String("grpc.component", "server"),
		slog.String("grpc.service", service),
		slog.String("grpc.method", method),
		slog.String("grpc.method_type", typ),
	)
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		attrs = append(attrs, slog.String("peer.address", p.Addr.String()))
	}
	attrs = append(attrs, slog.String("grpc.start_time", start.Format(time.RFC3339)))
	if d, ok := ctx.Deadline(); ok {
		attrs = append(attrs, slog.String("grpc.request.deadline", d.Format(time.RFC3339)))
	}
	attrs = append(attrs, slog.String("grpc.code", code.String()))
	if err != nil {
		attrs = append(attrs, slog.String("grpc.error", err.Error()))
	}
	ms := float64(elapsed.Microseconds()) / 1000
	attrs = append(attrs, slog.String("grpc.time_ms", strconv.FormatFloat(ms, 'f', -1, 32)))
	a.log.LogAttrs(ctx, lvl, "finished call", attrs...)
}

// splitMethod splits "/package.Service/Method".
func splitMethod(full string) (service, method string) {
	full = strings.TrimPrefix(full, "/")
	if i := strings.LastIndexByte(full, '/'); i >= 0 {
		return full[:i], full[i+1:]
	}
	return "unknown", "unknown"
}

// logLevel is the access log level of a call's outcome. Only codes that say
// the gateway itself failed are errors; ABORTED is a job's own failure (see
// jobCode), an outcome like any other.
func logLevel(c codes.Code) slog.Level {
	switch c {
	case codes.OK, codes.NotFound, codes.Canceled, codes.AlreadyExists:
		return slog.LevelDebug
	case codes.Aborted:
		return slog.LevelInfo
	case codes.Internal, codes.Unknown, codes.DataLoss:
		return slog.LevelError
	default:
		return slog.LevelWarn
	}
}
