package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sessiongate/sessiongate/gateway/arcp"
	"github.com/sessiongate/sessiongate/gateway/upstream"
)

// dialARCP opens n direct ARCP sessions to url with the gateway's upstream
// template and features, four at a time. On error the ones opened are closed.
func dialARCP(ctx context.Context, url string, n int) ([]*upstream.Conn, error) {
	conns := make([]*upstream.Conn, n)
	errs := make([]error, n)
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	for i := range conns {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			cfg := upstreamTemplate()
			cfg.URL = url
			cfg.Client = arcp.ClientInfo{Name: "gateway-bench", Version: "1"}
			cfg.Features = gatewayFeatures
			conns[i], errs[i] = upstream.Dial(ctx, cfg)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		closeARCP(conns)
		return nil, fmt.Errorf("direct ARCP dial: %w", err)
	}
	return conns, nil
}

// directCallers opens n direct ARCP connections to the runtime child and
// returns one arcpCaller on each, and a close for the connections.
func (b *bench) directCallers(ctx context.Context, n int) ([]callFunc, func(), error) {
	conns, err := dialARCP(ctx, b.rt.url, n)
	if err != nil {
		return nil, nil, err
	}
	calls := make([]callFunc, len(conns))
	for w, c := range conns {
		calls[w] = arcpCaller(c)
	}
	return calls, func() { closeARCP(conns) }, nil
}

// closeARCP closes every non-nil connection, each within 10 s, concurrently.
func closeARCP(conns []*upstream.Conn) {
	var wg sync.WaitGroup
	for _, c := range conns {
		if c == nil {
			continue
		}
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = c.Close(ctx)
		})
	}
	wg.Wait()
}

// arcpCaller runs one echo job on c: Submit, then Wait for its result.
func arcpCaller(c *upstream.Conn) callFunc {
	sub := arcp.Submit{Agent: "echo", Input: json.RawMessage(echoInput)}
	return func(ctx context.Context) error {
		acc, err := c.Submit(ctx, sub)
		if err != nil {
			return fmt.Errorf("upstream Submit: %w", err)
		}
		term, err := c.Wait(ctx, acc.JobID)
		if err != nil {
			return fmt.Errorf("upstream Wait: %w", err)
		}
		if term.Result == nil || string(term.Result.Result) != echoInput {
			return fmt.Errorf("echo job ended without its result: %+v", term)
		}
		return nil
	}
}
