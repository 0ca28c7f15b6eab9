package client

import (
	"crypto/rand"
	"encoding/hex"
)

// callKey is the idempotency key of one logical RunJob or SubmitJob call:
// the caller's (IdempotencyKey), or a fresh random one. The request, key
// included, is built once per call, so every attempt gRPC's retry policy
// makes carries the same key and a retried attempt gets the job the first
// one created (ARCP §7.2) instead of running it again.
func callKey(given string) string {
	if given != "" {
		return given
	}
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return "sg-" + hex.EncodeToString(b[:])
}
