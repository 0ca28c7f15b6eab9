package peerauth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// Claims are what a proof binds: who forwards, to whom, for whom, which
// call on which session with which request.
type Claims struct {
	From    string // instance id of the forwarding replica
	To      string // instance id of the replica the call is sent to
	Caller  string // the caller's identity, as the forwarder authenticated it
	Method  string // full gRPC method name
	Session string // the request's session id
	Digest  [32]byte
}

// Digest is the request digest of Claims: SHA-256 of the body's bytes.
func Digest(body []byte) [32]byte { return sha256.Sum256(body) }

// Defaults of Config.
const (
	DefaultTTL       = 3 * time.Second
	DefaultSkew      = time.Second
	DefaultMaxNonces = 1 << 20
)

// Config is a signer's and a verifier's configuration.
type Config struct {
	// Secret is the cluster secret shared by every replica (at least 16
	// bytes).
	Secret []byte
	// Self is the instance id of this replica: the To of the proofs it
	// verifies, the From of those it signs.
	Self string
	// TTL is how long a proof is valid after it is made (default
	// DefaultTTL).
	TTL time.Duration
	// Skew is the clock difference between replicas tolerated (default
	// DefaultSkew).
	Skew time.Duration
	// MaxNonces bounds the nonce cache (default DefaultMaxNonces).
	MaxNonces int
	// Rand is the source of the signer's nonce prefix (default
	// crypto/rand).
	Rand io.Reader
}

func (c *Config) setDefaults() {
	if c.TTL == 0 {
		c.TTL = DefaultTTL
	}
	if c.Skew == 0 {
		c.Skew = DefaultSkew
	}
	if c.MaxNonces == 0 {
		c.MaxNonces = DefaultMaxNonces
	}
	if c.Rand == nil {
		c.Rand = rand.Reader
	}
}

func (c *Config) validate() error {
	switch {
	case len(c.Secret) < 16:
		return errors.New("peerauth: Secret must be at least 16 bytes")
	case c.Self == "":
		return errors.New("peerauth: Self is required")
	case c.TTL < 0 || c.Skew < 0 || c.MaxNonces < 0:
		return errors.New("peerauth: TTL, Skew and MaxNonces must not be negative")
	}
	return nil
}

// Reasons a proof is refused (Error.Reason), also metric labels.
const (
	ReasonMalformed = "malformed"
	ReasonSelf      = "self"
	ReasonExpired   = "expired"
	ReasonTooFar    = "too_far"
	ReasonMismatch  = "mismatch"
	ReasonReplay    = "replay"
	ReasonCacheFull = "cache_full"
)

// Reasons lists every Reason, for metrics that start at zero.
var Reasons = []string{ReasonMalformed, ReasonSelf, ReasonExpired, ReasonTooFar, ReasonMismatch, ReasonReplay, ReasonCacheFull}

// Error is a refused proof.
type Error struct{ Reason string }

func (e *Error) Error() string {
	switch e.Reason {
	case ReasonMalformed:
		return "malformed forwarding proof"
	case ReasonSelf:
		return "forwarding proof names this replica as its sender"
	case ReasonExpired:
		return "forwarding proof expired"
	case ReasonTooFar:
		return "forwarding proof expires too far ahead (clock skew?)"
	case ReasonMismatch:
		return "forwarding proof does not match this call"
	case ReasonReplay:
		return "forwarding proof already used"
	case ReasonCacheFull:
		return "too many forwarding proofs in flight"
	}
	return "forwarding proof refused: " + e.Reason
}

// ReasonOf is err's Reason ("" when err is not an *Error).
func ReasonOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ""
}

const (
	version  = 2
	nonceLen = 16
	macLen   = sha256.Size
	tokenLen = 1 + 8 + nonceLen + macLen
)

// TokenLen is the length of a token, encoded (base64url of tokenLen bytes,
// unpadded).
const TokenLen = (tokenLen*8 + 5) / 6

// macState is a MAC and its scratch space, reused (sync.Pool) so that a
// proof costs no allocation for them.
type macState struct {
	h   hash.Hash
	buf [256]byte
	sum [macLen]byte
}

type nonce [nonceLen]byte

// Auth signs and verifies proofs. It is safe for concurrent use.
type Auth struct {
	// Immutable.
	cfg    Config
	prefix [8]byte
	macs   sync.Pool // *macState

	ctr    atomic.Uint64
	nonces *nonceCache
}

// New returns an Auth for cfg.
func New(cfg Config) (*Auth, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	a := &Auth{cfg: cfg}
	if _, err := io.ReadFull(cfg.Rand, a.prefix[:]); err != nil {
		return nil, fmt.Errorf("peerauth: nonce prefix: %w", err)
	}
	a.macs.New = func() any { return &macState{h: hmac.New(sha256.New, a.cfg.Secret)} }
	a.nonces = newNonceCache(cfg.TTL+2*cfg.Skew, cfg.MaxNonces)
	return a, nil
}

// Sign returns the token for c (c.From is set to Self) at now.
func (a *Auth) Sign(c Claims, now time.Time) string {
	c.From = a.cfg.Self
	var raw [tokenLen]byte
	raw[0] = version
	binary.BigEndian.PutUint64(raw[1:9], uint64(now.Add(a.cfg.TTL).UnixMilli()))
	copy(raw[9:17], a.prefix[:])
	binary.BigEndian.PutUint64(raw[17:25], a.ctr.Add(1))
	a.mac((*[macLen]byte)(raw[25:]), &c, raw[1:25])
	var out [TokenLen]byte
	base64.RawURLEncoding.Encode(out[:], raw[:])
	return string(out[:])
}

// Verify checks token against the claims the verifying replica sees (c.To
// is set to Self) at now, and remembers its nonce. It returns nil or an
// *Error; see the package doc for the rules.
func (a *Auth) Verify(token string, c Claims, now time.Time) error {
	c.To = a.cfg.Self
	var raw [tokenLen]byte
	if len(token) != TokenLen {
		return &Error{ReasonMalformed}
	}
	var enc [TokenLen]byte
	copy(enc[:], token)
	if n, err := base64.RawURLEncoding.Decode(raw[:], enc[:]); err != nil || n != tokenLen || raw[0] != version {
		return &Error{ReasonMalformed}
	}
	if c.From == "" || c.Caller == "" {
		return &Error{ReasonMalformed}
	}
	if c.From == a.cfg.Self {
		return &Error{ReasonSelf}
	}
	exp := int64(binary.BigEndian.Uint64(raw[1:9]))
	nowMS := now.UnixMilli()
	switch {
	case exp+a.cfg.Skew.Milliseconds() < nowMS:
		return &Error{ReasonExpired}
	case exp > nowMS+(a.cfg.TTL+a.cfg.Skew).Milliseconds():
		return &Error{ReasonTooFar}
	}
	var want [macLen]byte
	a.mac(&want, &c, raw[1:25])
	if !hmac.Equal(want[:], raw[25:]) {
		return &Error{ReasonMismatch}
	}
	var n nonce
	copy(n[:], raw[9:25])
	switch a.nonces.add(n, now) {
	case addReplay:
		return &Error{ReasonReplay}
	case addFull:
		return &Error{ReasonCacheFull}
	}
	return nil
}

// Nonces is how many nonces the cache holds.
func (a *Auth) Nonces() int { return a.nonces.len() }

// mac writes the MAC of c and tail (expiry ‖ nonce) to dst.
func (a *Auth) mac(dst *[macLen]byte, c *Claims, tail []byte) {
	m := a.macs.Get().(*macState)
	m.h.Reset()
	b := append(m.buf[:0], "sessiongate/forward/v2"...)
	for _, s := range [...]string{c.From, c.To, c.Caller, c.Method, c.Session} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		if len(b)+len(s) > len(m.buf) {
			m.h.Write(b)
			m.h.Write([]byte(s))
			b = m.buf[:0]
			continue
		}
		b = append(b, s...)
	}
	b = append(b, c.Digest[:]...)
	b = append(b, tail...)
	m.h.Write(b)
	copy(dst[:], m.h.Sum(m.sum[:0]))
	a.macs.Put(m)
}
