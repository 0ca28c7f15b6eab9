package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/sessiongate/sessiongate/client"
	gatewayv1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
)

// Open a session, run a job with plain values, and close both.
func Example() {
	ctx := context.Background()
	c, err := client.New("127.0.0.1:50051")
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	s, err := c.OpenSession(ctx, &gatewayv1.OpenSessionRequest{ClientName: "example"})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close(ctx)
	res, err := s.Run(ctx, "echo", map[string]any{"hello": "world"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Result)
}

// A deadline on the context is also the budget asked of the gateway, which
// answers just before it with the timeout details.
func ExampleTimeoutError() {
	var s *client.Session // from Client.OpenSession
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_, err := s.Run(ctx, "sleep", map[string]any{"ms": 3000})
	var te *client.TimeoutError
	if errors.As(err, &te) {
		fmt.Printf("profile %s: %v configured, %v elapsed (%s)\n", te.Profile, te.Configured, te.Elapsed, te.Limit)
	}
}

// A server budget of one's own, below the deadline: x-timeout-ms in the
// outgoing metadata is sent as it is.
func ExampleSession_Run_serverBudget() {
	var s *client.Session // from Client.OpenSession
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, client.TimeoutMetadataKey, "2000")
	_, err := s.Run(ctx, "sleep", map[string]any{"ms": 3000})
	fmt.Println(err)
}

// Watch a job's events until its result.
func ExampleSession_Watch() {
	var s *client.Session // from Client.OpenSession
	ctx := context.Background()
	job, err := s.Submit(ctx, "stream", map[string]any{"count": 3, "interval_ms": 100})
	if err != nil {
		log.Fatal(err)
	}
	for item, err := range s.Watch(ctx, job.ID) {
		if err != nil {
			log.Fatal(err)
		}
		switch {
		case item.Event != nil:
			fmt.Println(item.EventSeq, item.Event.Kind, item.Event.Body)
		case item.Result != nil:
			fmt.Println("result", item.Result.Result)
		case item.Error != nil:
			fmt.Println("failed", item.Error.Code)
		}
	}
}

// Input that cannot be sent is refused before the call, with its path.
func ExampleInputError() {
	var s *client.Session // from Client.OpenSession
	_, err := s.Run(context.Background(), "echo", map[string]any{"ids": []any{1, 1 << 60}})
	var ie *client.InputError
	if errors.As(err, &ie) {
		fmt.Println(ie.Path) // input.ids[1]
	}
}
