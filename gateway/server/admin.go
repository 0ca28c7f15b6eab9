package server

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sessiongate/sessiongate/gateway/session"
	sessiongatev1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
)

// statusJSON is the HTTP form of GetSessionStatusResponse.
type statusJSON struct {
	Status       string   `json:"status"`
	Phase        string   `json:"phase,omitempty"`
	Runtime      string   `json:"runtime,omitempty"`
	Features     []string `json:"features,omitempty"`
	LastEventSeq uint64   `json:"last_event_seq,omitempty"`
	Generation   uint64   `json:"generation,omitempty"`
	InstanceID   string   `json:"instance_id"`
	Error        string   `json:"error,omitempty"`
}

func phaseName(p sessiongatev1.SessionPhase) string {
	return strings.ToLower(strings.TrimPrefix(p.String(), "SESSION_PHASE_"))
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// adminHandler serves /metrics, /healthz and /v1/sessions/{id}/status.
func (g *Gateway) adminHandler(reg prometheus.Gatherer) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		if g.draining.Load() {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "draining"})
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "serving"})
	})
	mux.HandleFunc("GET /v1/sessions/{id}/status", g.httpStatus)
	return mux
}

// httpStatus is GetSessionStatus for balancers that cannot speak gRPC: 200
// with {"status":"live",…} or 404 with {"status":"not_found"}. Like the gRPC
// method it reads memory only.
func (g *Gateway) httpStatus(w http.ResponseWriter, r *http.Request) {
	caller, ok := g.ids.httpCaller(r)
	if !ok {
		writeJSON(w, http.StatusUnauthorized, statusJSON{Error: "authorization: Bearer <token> is required", InstanceID: g.table.InstanceID()})
		return
	}
	id := r.PathValue("id")
	if _, ok := session.ParseID(id); !ok {
		writeJSON(w, http.StatusBadRequest, statusJSON{Error: "malformed session id: pass the id returned by OpenSession", InstanceID: g.table.InstanceID()})
		return
	}
	resp := g.svc.status(id, caller)
	if resp.GetStatus() != sessiongatev1.SessionStatus_SESSION_STATUS_LIVE {
		writeJSON(w, http.StatusNotFound, statusJSON{Status: "not_found", InstanceID: resp.GetInstanceId()})
		return
	}
	writeJSON(w, http.StatusOK, statusJSON{
		Status: "live", Phase: phaseName(resp.GetPhase()), Runtime: resp.GetRuntime(), Features: resp.GetFeatures(),
		LastEventSeq: resp.GetLastEventSeq(), Generation: resp.GetGeneration(), InstanceID: resp.GetInstanceId(),
	})
}
