package upstream_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/sessiongate/sessiongate/gateway/upstream"
)

// oneAnswerRuntime answers every hello with answer.
func oneAnswerRuntime(t *testing.T, answer string) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer ws.CloseNow()
		if _, _, err := ws.Read(r.Context()); err != nil {
			return
		}
		_ = ws.Write(r.Context(), websocket.MessageText, []byte(answer))
		for {
			if _, _, err := ws.Read(r.Context()); err != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	return "ws" + strings.TrimPrefix(srv.URL, "http") + "/arcp"
}

// TestHandshakeWrongFrameFailsAtOnce: a runtime that answers the hello with
// anything but session.welcome or session.error fails the dial at once with
// what came, not after the whole InitTimeout as "unreachable".
func TestHandshakeWrongFrameFailsAtOnce(t *testing.T) {
	for name, answer := range map[string]string{
		"another type":       `{"arcp":"1.1","id":"a","type":"job.accepted","session_id":"s","job_id":"j","payload":{"job_id":"j"}}`,
		"unknown type":       `{"arcp":"1.1","id":"a","type":"x.hello","session_id":"s"}`,
		"not json":           `{"arcp":`,
		"welcome, no token":  `{"arcp":"1.1","id":"a","type":"session.welcome","session_id":"s","payload":{"resume_window_sec":60}}`,
		"welcome, bad types": `{"arcp":"1.1","id":"a","type":"session.welcome","session_id":"s","payload":{"resume_token":7}}`,
	} {
		t.Run(name, func(t *testing.T) {
			cfg := baseConfig(oneAnswerRuntime(t, answer))
			cfg.InitTimeout = 10 * time.Second
			ctx := testCtx(t, 15*time.Second)
			start := time.Now()
			c, err := upstream.Dial(ctx, cfg)
			if err == nil {
				c.Close(context.Background())
				t.Fatal("Dial succeeded")
			}
			var pe *upstream.ProtocolError
			if !errors.As(err, &pe) || pe.Stage != "handshake" || pe.Detail == "" {
				t.Fatalf("Dial err = %v, want a ProtocolError naming what came", err)
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Fatalf("Dial failed after %v: it waited for the handshake timeout", d)
			}
		})
	}
}

// TestHandshakeOddHeartbeatClamped: fractional and tiny heartbeat and resume
// window numbers are clamped to the client's bounds, not refused.
func TestHandshakeOddHeartbeatClamped(t *testing.T) {
	for _, hb := range []string{"0.001", "0.5", "1e-9"} {
		t.Run(hb, func(t *testing.T) {
			url := oneAnswerRuntime(t, `{"arcp":"1.1","id":"a","type":"session.welcome","session_id":"s","payload":{"resume_token":"r","resume_window_sec":0.5,"heartbeat_interval_sec":`+hb+`,"capabilities":{"encodings":["json"]}}}`)
			ctx := testCtx(t, 10*time.Second)
			c, err := upstream.Dial(ctx, baseConfig(url))
			if err != nil {
				t.Fatalf("Dial with heartbeat_interval_sec %s: %v", hb, err)
			}
			// This runtime never answers session.close: do not wait for it.
			cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			defer cancel()
			c.Close(cctx)
		})
	}
}
