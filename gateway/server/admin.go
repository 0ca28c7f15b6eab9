package server

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/sessiongate/sessiongate/gateway/session"
	sessiongatev1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
)

// The admin HTTP port speaks the same JSON dialect as gRPC JSON tools
// (grpcurl, grpc-gateway): protojson. The session status probe answers with
// a sessiongate.v1.GetSessionStatusResponse (camelCase names, enum value
// names, 64-bit integers as strings), errors with a google.rpc.Status
// carrying the same ErrorInfo a gRPC call would get. Output is compact, so
// that it is stable for scripts (protojson deliberately varies whitespace).

var jsonOpts = protojson.MarshalOptions{}

func writeProto(w http.ResponseWriter, code int, m proto.Message) {
	raw, err := jsonOpts.Marshal(m)
	var buf bytes.Buffer
	if err == nil {
		err = json.Compact(&buf, raw)
	}
	if err != nil {
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	buf.WriteByte('\n')
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write(buf.Bytes())
}

// writeStatus writes err (a gRPC status error) as a google.rpc.Status.
func writeStatus(w http.ResponseWriter, code int, err error) {
	writeProto(w, code, status.Convert(err).Proto())
}

// adminHandler serves /metrics, /healthz and /v1/sessions/{id}/status.
func (g *Gateway) adminHandler(reg prometheus.Gatherer) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		if g.draining.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"status":"NOT_SERVING"}` + "\n"))
			return
		}
		_, _ = w.Write([]byte(`{"status":"SERVING"}` + "\n"))
	})
	mux.HandleFunc("GET /v1/sessions/{id}/status", g.httpStatus)
	return mux
}

// httpStatus is GetSessionStatus for balancers that cannot speak gRPC: 200
// with a LIVE GetSessionStatusResponse, or 404 with a NOT_FOUND one; 401 and
// 400 answer a google.rpc.Status. Like the gRPC method it reads memory only.
func (g *Gateway) httpStatus(w http.ResponseWriter, r *http.Request) {
	caller, ok := g.ids.httpCaller(r)
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="sessiongate"`)
		writeStatus(w, http.StatusUnauthorized, gatewayStatus(codes.Unauthenticated, "UNAUTHENTICATED",
			"authorization: Bearer <token> is required: send the token of a configured client identity", nil))
		return
	}
	id := r.PathValue("id")
	if _, ok := session.ParseID(id); !ok {
		writeStatus(w, http.StatusBadRequest, gatewayStatus(codes.InvalidArgument, "INVALID_ARGUMENT",
			"session id "+quoteClip(id)+" is malformed: pass the session_id returned by OpenSession", map[string]string{"field": "session_id"}))
		return
	}
	resp, err := g.svc.statusAny(r.Context(), id, caller)
	if err != nil {
		writeStatus(w, http.StatusServiceUnavailable, err)
		return
	}
	code := http.StatusOK
	if resp.GetStatus() != sessiongatev1.SessionStatus_SESSION_STATUS_LIVE {
		code = http.StatusNotFound
	}
	writeProto(w, code, resp)
}

func quoteClip(s string) string {
	b, _ := json.Marshal(clip(s))
	return string(b)
}
