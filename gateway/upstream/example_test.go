package upstream_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/sessiongate/sessiongate/gateway/arcp"
	"github.com/sessiongate/sessiongate/gateway/arcpruntime"
	"github.com/sessiongate/sessiongate/gateway/upstream"
)

// Dial a runtime, run a job, watch another one, and close the session.
func Example() {
	rt, err := arcpruntime.Listen("127.0.0.1:0", arcpruntime.Options{})
	if err != nil {
		panic(err)
	}
	defer rt.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := upstream.Dial(ctx, upstream.Config{
		URL:    rt.URL(),
		Token:  "secret",
		Client: arcp.ClientInfo{Name: "example", Version: "1"},
	})
	if err != nil {
		panic(err)
	}
	defer conn.Close(ctx)
	fmt.Println("state:", conn.Status().State, "features:", conn.Status().Features)

	// Submit waits for job.accepted; Wait for the job's terminal.
	acc, err := conn.Submit(ctx, arcp.Submit{Agent: "echo", Input: json.RawMessage(`{"hello":"world"}`)})
	if err != nil {
		panic(err)
	}
	term, err := conn.Wait(ctx, acc.JobID)
	if err != nil {
		panic(err)
	}
	fmt.Println("echo:", string(term.Result.Result))

	// A Watcher replays the job's retained events, then follows it live.
	acc, err = conn.Submit(ctx, arcp.Submit{Agent: "stream", Input: json.RawMessage(`{"count":3}`)})
	if err != nil {
		panic(err)
	}
	w, err := conn.Watch(acc.JobID, 0)
	if err != nil {
		panic(err)
	}
	defer w.Close()
	for {
		it, err := w.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			panic(err)
		}
		switch {
		case it.Event != nil:
			fmt.Println("event:", it.Event.Kind, string(it.Event.Body))
		case it.Result != nil:
			fmt.Println("result:", string(it.Result.Result))
		}
	}
	// Output:
	// state: ready features: [heartbeat ack list_jobs subscribe result_chunk]
	// echo: {"hello":"world"}
	// event: log {"i":0,"message":"line 1 of 3"}
	// event: log {"i":1,"message":"line 2 of 3"}
	// event: log {"i":2,"message":"line 3 of 3"}
	// result: {"count":3}
}
