// Command gateway runs sessiongate: a gRPC gateway to ARCP 1.1 agent
// runtimes. With no flags it serves gRPC on 127.0.0.1:50051 and its admin
// HTTP port on 127.0.0.1:8080, with the reference runtime embedded in-process
// as the default runtime.
//
//	gateway [flags]            run the gateway
//	gateway profiles           print the effective timeout profile table as JSON
//
// Every flag has an environment variable (see -h).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "gateway:", err)
		os.Exit(1)
	}
}
