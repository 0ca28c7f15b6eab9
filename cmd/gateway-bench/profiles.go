package main

import (
	"io"
	"log/slog"
	"os"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sessiongate/sessiongate/gateway/server"
	"github.com/sessiongate/sessiongate/timeoutprofile"
)

// timeoutProfiles is the global layer of the timeout profile table as the
// gateway command loads it: the standard profiles, then TIMEOUTPROFILE_FILE
// and the TIMEOUTPROFILE_* environment variables.
func timeoutProfiles() (*timeoutprofile.Config, error) {
	return timeoutprofile.LoadGlobal(os.Getenv)
}

// newEnforcer builds the enforcer exactly as server.New does for the
// gateway (server.NewEnforcer), with its own metrics registry and a
// discarded log, for section 8.
func newEnforcer() (*timeoutprofile.Enforcer, error) {
	global, err := timeoutProfiles()
	if err != nil {
		return nil, err
	}
	return server.NewEnforcer(global, prometheus.NewRegistry(), slog.New(slog.NewJSONHandler(io.Discard, nil)))
}
