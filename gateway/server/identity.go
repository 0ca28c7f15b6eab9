package server

import (
	"context"
	"crypto/sha256"
	"net/http"
	"strings"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/auth"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Anonymous is the caller identity when no client tokens are configured.
const Anonymous = "anonymous"

type callerKey struct{}

// callerFrom returns the caller identity the auth interceptor stored.
func callerFrom(ctx context.Context) string {
	if c, ok := ctx.Value(callerKey{}).(string); ok {
		return c
	}
	return Anonymous
}

// CallerFrom is callerFrom for other packages' interceptors, such as the
// per-caller timeout profiles.
func CallerFrom(ctx context.Context) string { return callerFrom(ctx) }

// identities maps bearer tokens to caller names. Tokens are kept hashed so a
// lookup's timing says nothing about a token's prefix.
type identities map[[sha256.Size]byte]string

func newIdentities(tokens map[string]string) identities {
	if len(tokens) == 0 {
		return nil
	}
	ids := make(identities, len(tokens))
	for tok, name := range tokens {
		ids[sha256.Sum256([]byte(tok))] = name
	}
	return ids
}

func (ids identities) lookup(token string) (string, bool) {
	name, ok := ids[sha256.Sum256([]byte(token))]
	return name, ok
}

// authFunc is the go-grpc-middleware auth function: with tokens configured,
// "authorization: Bearer <token>" is required and names the caller; without,
// every caller is Anonymous.
func (ids identities) authFunc(ctx context.Context) (context.Context, error) {
	if ids == nil {
		return context.WithValue(ctx, callerKey{}, Anonymous), nil
	}
	tok, err := auth.AuthFromMD(ctx, "bearer")
	if err != nil {
		return nil, status.Error(codes.Unauthenticated, "authorization: Bearer <token> metadata is required")
	}
	name, ok := ids.lookup(tok)
	if !ok {
		return nil, status.Error(codes.Unauthenticated, "the bearer token is not recognised")
	}
	return context.WithValue(ctx, callerKey{}, name), nil
}

// httpCaller resolves the caller of an admin HTTP request the same way.
func (ids identities) httpCaller(r *http.Request) (string, bool) {
	if ids == nil {
		return Anonymous, true
	}
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return "", false
	}
	return ids.lookup(strings.TrimSpace(tok))
}
