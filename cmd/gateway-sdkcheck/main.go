package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/sessiongate/sessiongate/gateway/arcpruntime"
)

func main() {
	runtimeURL := flag.String("runtime", "", "the runtime's WebSocket URL (default: the reference runtime in -dialect)")
	dialect := flag.String("dialect", "reference", "reference runtime dialect without -runtime: reference, go-sdk or ts-sdk")
	frames := flag.String("frames", "", "write every frame to this file")
	timeout := flag.Duration("timeout", 2*time.Minute, "bound of the whole run")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	var log io.Writer = io.Discard
	if *frames != "" {
		f, err := os.Create(*frames)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		defer f.Close()
		log = f
	}
	url := *runtimeURL
	if url == "" {
		var d arcpruntime.Dialect
		found := false
		for _, nd := range arcpruntime.Dialects {
			if nd.Name == *dialect {
				d, found = nd.Dialect, true
			}
		}
		if !found {
			fmt.Fprintf(os.Stderr, "unknown dialect %q\n", *dialect)
			os.Exit(2)
		}
		srv, err := arcpruntime.Listen("127.0.0.1:0", arcpruntime.Options{Dialect: d})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		defer srv.Close()
		url = srv.URL()
	}
	rep, err := run(ctx, url, log)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gateway-sdkcheck:", err)
		os.Exit(2)
	}
	rep.print(os.Stdout)
	if bad := rep.broken(); len(bad) > 0 {
		for _, b := range bad {
			fmt.Println("BROKEN:", b)
		}
		os.Exit(1)
	}
}
