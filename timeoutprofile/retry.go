package timeoutprofile

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// RetryPolicy configures RetryServiceConfig (SW4-002 §5.2). Zero fields
// take the documented defaults.
type RetryPolicy struct {
	// Services are the fully qualified services the policy applies to;
	// empty applies it to every method of the channel.
	Services []string
	// MaxAttempts counts the first attempt: 2 to 5 (default 3). gRPC caps
	// it at 5.
	MaxAttempts int
	// InitialBackoff (default 100 ms) grows by BackoffMultiplier (default 2)
	// per attempt up to MaxBackoff (default 5 s). gRPC waits a random time
	// between 0 and the current backoff (full jitter).
	InitialBackoff, MaxBackoff time.Duration
	BackoffMultiplier          float64
	// MaxTokens and TokenRatio are the retry budget (gRPC retryThrottling):
	// each failure costs a token, each success earns TokenRatio; retries stop
	// while fewer than half of MaxTokens remain (defaults 10 and 0.1).
	MaxTokens, TokenRatio float64
}

//go:generate go test -run ^TestRetryServiceConfigFile$ -update .

// RetryServiceConfig returns a gRPC service config, for
// grpc.WithDefaultServiceConfig, that retries DEADLINE_EXCEEDED and
// UNAVAILABLE with exponential backoff, at most p.MaxAttempts attempts, under
// a retry budget (retryThrottling).
//
// gRPC's built-in retry runs beneath the client interceptors, inside the
// call's deadline: a DEADLINE_EXCEEDED is retried only when the server's
// budget ran out before the caller's deadline (the server returned it), not
// when the caller's own deadline passed. For a fresh budget per attempt, or
// to shrink it on each retry (fast-fail), use go-grpc-middleware's retry
// interceptor in front of this package's client interceptor (see the
// package documentation).
//
// The default policy, RetryServiceConfig(RetryPolicy{}), is also published
// as the file timeoutprofile/retry_service_config.json for clients in other
// languages (grpcio's "grpc.service_config" channel option, grpc-js's
// 'grpc.service_config'); a test keeps the two equal.
func RetryServiceConfig(p RetryPolicy) (string, error) {
	if p.MaxAttempts == 0 {
		p.MaxAttempts = 3
	}
	if p.InitialBackoff == 0 {
		p.InitialBackoff = 100 * time.Millisecond
	}
	if p.MaxBackoff == 0 {
		p.MaxBackoff = 5 * time.Second
	}
	if p.BackoffMultiplier == 0 {
		p.BackoffMultiplier = 2
	}
	if p.MaxTokens == 0 {
		p.MaxTokens = 10
	}
	if p.TokenRatio == 0 {
		p.TokenRatio = 0.1
	}
	switch {
	case p.MaxAttempts < 2 || p.MaxAttempts > 5:
		return "", errors.New("timeoutprofile: RetryPolicy.MaxAttempts: want 2 to 5")
	case p.InitialBackoff <= 0 || p.MaxBackoff < p.InitialBackoff:
		return "", errors.New("timeoutprofile: RetryPolicy: want 0 < InitialBackoff <= MaxBackoff")
	case !(p.BackoffMultiplier > 0):
		return "", errors.New("timeoutprofile: RetryPolicy.BackoffMultiplier: must be positive")
	case !(p.MaxTokens > 0 && p.MaxTokens <= 1000):
		return "", errors.New("timeoutprofile: RetryPolicy.MaxTokens: want 0 < MaxTokens <= 1000")
	case !(p.TokenRatio > 0):
		return "", errors.New("timeoutprofile: RetryPolicy.TokenRatio: must be positive")
	}
	type name struct {
		Service string `json:"service,omitempty"`
	}
	type retryPolicy struct {
		MaxAttempts          int      `json:"maxAttempts"`
		InitialBackoff       string   `json:"initialBackoff"`
		MaxBackoff           string   `json:"maxBackoff"`
		BackoffMultiplier    float64  `json:"backoffMultiplier"`
		RetryableStatusCodes []string `json:"retryableStatusCodes"`
	}
	type methodConfig struct {
		Name        []name      `json:"name"`
		RetryPolicy retryPolicy `json:"retryPolicy"`
	}
	type throttling struct {
		MaxTokens  float64 `json:"maxTokens"`
		TokenRatio float64 `json:"tokenRatio"`
	}
	type serviceConfig struct {
		MethodConfig    []methodConfig `json:"methodConfig"`
		RetryThrottling throttling     `json:"retryThrottling"`
	}
	names := []name{{}}
	if len(p.Services) > 0 {
		names = names[:0]
		for _, s := range p.Services {
			if !protoreflect.FullName(s).IsValid() {
				return "", fmt.Errorf("timeoutprofile: RetryPolicy.Services: invalid service name %q", s)
			}
			names = append(names, name{Service: s})
		}
	}
	sc := serviceConfig{
		MethodConfig: []methodConfig{{
			Name: names,
			RetryPolicy: retryPolicy{
				MaxAttempts:          p.MaxAttempts,
				InitialBackoff:       seconds(p.InitialBackoff),
				MaxBackoff:           seconds(p.MaxBackoff),
				BackoffMultiplier:    p.BackoffMultiplier,
				RetryableStatusCodes: []string{"DEADLINE_EXCEEDED", "UNAVAILABLE"},
			},
		}},
		RetryThrottling: throttling{MaxTokens: p.MaxTokens, TokenRatio: p.TokenRatio},
	}
	out, err := json.Marshal(sc)
	return string(out), err
}

// seconds formats d as a protobuf JSON Duration, e.g. "0.1s".
func seconds(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "s"
}
