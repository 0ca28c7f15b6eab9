package tpprom_test

import (
	"fmt"
	"log"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sessiongate/sessiongate/timeoutprofile"
	"github.com/sessiongate/sessiongate/timeoutprofile/tpprom"
)

func ExampleNew() {
	reg := prometheus.NewRegistry()
	obs, err := tpprom.New(reg)
	if err != nil {
		log.Fatal(err)
	}
	tp, err := timeoutprofile.New(timeoutprofile.WithObserver(obs))
	if err != nil {
		log.Fatal(err)
	}
	_ = tp // install tp's interceptors on the server

	// What the interceptors do for each call of a method:
	m := obs.ForMethod("tool_call", "acme.tools.v1.Tools", "Run")
	m.Duration(1500 * time.Millisecond)
	m.Clamped(timeoutprofile.RuleAboveMax)

	mfs, err := reg.Gather()
	if err != nil {
		log.Fatal(err)
	}
	for _, mf := range mfs {
		fmt.Println(mf.GetName(), len(mf.GetMetric()))
	}
	// Output:
	// sw4rm_rpc_duration_ms 1
	// sw4rm_rpc_timeout_clamped_total 4
	// sw4rm_rpc_timeout_total 1
}
