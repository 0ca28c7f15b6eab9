package peerauth

import (
	"bytes"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var seedFlag = flag.Uint64("seed", 0, "replay the property test's schedule of this seed")

var secret = []byte("peerauth-test-secret-0123456789")

func newAuth(t testing.TB, self string, mod func(*Config)) *Auth {
	t.Helper()
	cfg := Config{Secret: secret, Self: self}
	if mod != nil {
		mod(&cfg)
	}
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func claims(session, body string) Claims {
	return Claims{To: "gw-a", Caller: "alice", Method: "/sessiongate.v1.SessionGateway/RunJob", Session: session, Digest: Digest([]byte(body))}
}

// seen is what the receiving replica sees of a forwarded call: the hop
// header's sender and the call itself.
func seen(from string, c Claims) Claims { c.From = from; return c }

func TestConfigValidation(t *testing.T) {
	for _, cfg := range []Config{
		{Secret: []byte("short"), Self: "a"},
		{Secret: secret},
		{Secret: secret, Self: "a", TTL: -1},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) accepted", cfg)
		}
	}
}

// TestReplays: a token lifted off one forwarded call is refused when sent
// again — as it was, for another session, with another body, later, to
// another replica, under another caller or method — and a replica refuses a
// proof naming itself.
func TestReplays(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	b := newAuth(t, "gw-b", nil)
	a := newAuth(t, "gw-a", nil)
	c3 := newAuth(t, "gw-c", nil)
	call := claims("s1", `{"agent":"echo"}`)
	tok := b.Sign(call, now) // gw-b forwards to gw-a
	// Other claims first (each refused before the nonce is spent).
	other := func(f func(*Claims)) Claims { c := seen("gw-b", call); f(&c); return c }
	cases := []struct {
		name   string
		v      *Auth
		c      Claims
		at     time.Time
		reason string
	}{
		{"other session", a, other(func(c *Claims) { c.Session = "s2" }), now, ReasonMismatch},
		{"other body", a, other(func(c *Claims) { c.Digest = Digest([]byte(`{"agent":"rm -rf"}`)) }), now, ReasonMismatch},
		{"other caller", a, other(func(c *Claims) { c.Caller = "mallory" }), now, ReasonMismatch},
		{"other method", a, other(func(c *Claims) { c.Method = "/sessiongate.v1.SessionGateway/CloseSession" }), now, ReasonMismatch},
		{"other sender named", a, other(func(c *Claims) { c.From = "gw-c" }), now, ReasonMismatch},
		{"other destination", c3, seen("gw-b", call), now, ReasonMismatch},
		{"self as sender", b, seen("gw-b", call), now, ReasonSelf},
		{"later", a, seen("gw-b", call), now.Add(DefaultTTL + DefaultSkew + time.Millisecond), ReasonExpired},
		{"first use", a, seen("gw-b", call), now.Add(10 * time.Millisecond), ""},
		{"same again", a, seen("gw-b", call), now.Add(20 * time.Millisecond), ReasonReplay},
		{"same again, at the edge of expiry", a, seen("gw-b", call), now.Add(DefaultTTL + DefaultSkew), ReasonReplay},
	}
	for _, tc := range cases {
		err := tc.v.Verify(tok, tc.c, tc.at)
		if got := ReasonOf(err); got != tc.reason || (tc.reason == "") != (err == nil) {
			t.Errorf("%s: %v (reason %q), want reason %q", tc.name, err, got, tc.reason)
		}
	}
	// A proof made with another secret is a forgery.
	f, err := New(Config{Secret: []byte("another-secret-0123456789"), Self: "gw-b"})
	if err != nil {
		t.Fatal(err)
	}
	if got := ReasonOf(a.Verify(f.Sign(claims("s1", "x"), now), seen("gw-b", claims("s1", "x")), now)); got != ReasonMismatch {
		t.Errorf("forged proof: reason %q, want mismatch", got)
	}
	// A proof from the future beyond TTL + Skew.
	if got := ReasonOf(a.Verify(b.Sign(claims("s1", "x"), now.Add(DefaultSkew+time.Second)), seen("gw-b", claims("s1", "x")), now)); got != ReasonTooFar {
		t.Errorf("proof from the future: reason %q, want too_far", got)
	}
}

func TestMalformed(t *testing.T) {
	a := newAuth(t, "gw-a", nil)
	b := newAuth(t, "gw-b", nil)
	now := time.Now()
	good := b.Sign(claims("s", "x"), now)
	raw, _ := base64.RawURLEncoding.DecodeString(good)
	raw[0] = 1
	for name, tok := range map[string]string{
		"empty": "", "short": good[:len(good)-1], "long": good + "A", "padding": good[:len(good)-2] + "==",
		"old version": base64.RawURLEncoding.EncodeToString(raw), "old v1 form": fmt.Sprintf("%d.%064x", now.UnixMilli(), 7),
	} {
		if got := ReasonOf(a.Verify(tok, seen("gw-b", claims("s", "x")), now)); got != ReasonMalformed {
			t.Errorf("%s: reason %q, want malformed", name, got)
		}
	}
	if got := ReasonOf(a.Verify(good, seen("", claims("s", "x")), now)); got != ReasonMalformed {
		t.Errorf("no sender: reason %q", got)
	}
	if err := a.Verify(good, seen("gw-b", claims("s", "x")), now); err != nil {
		t.Errorf("the untouched token: %v", err)
	}
}

// TestConcurrentReplay: one token verified by many goroutines at once is
// accepted exactly once.
func TestConcurrentReplay(t *testing.T) {
	a := newAuth(t, "gw-a", nil)
	b := newAuth(t, "gw-b", nil)
	now := time.Now()
	for round := range 50 {
		c := claims(fmt.Sprint("s", round), "x")
		tok := b.Sign(c, now)
		var ok, replay atomic.Int32
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				switch err := a.Verify(tok, seen("gw-b", c), now); ReasonOf(err) {
				case "":
					ok.Add(1)
				case ReasonReplay:
					replay.Add(1)
				default:
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		if ok.Load() != 1 || replay.Load() != 7 {
			t.Fatalf("round %d: %d accepted, %d replays; want 1 and 7", round, ok.Load(), replay.Load())
		}
	}
}

// TestNonceCacheBounded: the cache is emptied by expiry, and when full it
// refuses (fails closed) instead of growing.
func TestNonceCacheBounded(t *testing.T) {
	a := newAuth(t, "gw-a", func(c *Config) { c.MaxNonces = 64 * shards })
	b := newAuth(t, "gw-b", nil)
	now := time.UnixMilli(1_800_000_000_000)
	accepted, full := 0, 0
	for i := range 2000 {
		c := claims("s", fmt.Sprint(i))
		switch err := a.Verify(b.Sign(c, now), seen("gw-b", c), now); ReasonOf(err) {
		case "":
			accepted++
		case ReasonCacheFull:
			full++
		default:
			t.Fatal(err)
		}
	}
	if accepted != 64*shards || full != 2000-64*shards || a.Nonces() != 64*shards {
		t.Fatalf("accepted %d, refused as full %d, cached %d; want %d, %d, %d", accepted, full, a.Nonces(), 64*shards, 2000-64*shards, 64*shards)
	}
	// Every cached proof has expired 2·(TTL+2·Skew) later: the cache
	// drops them as new proofs arrive.
	later := now.Add(2 * (DefaultTTL + 2*DefaultSkew))
	for i := range 2000 {
		c := claims("s", fmt.Sprint("later", i))
		if err := a.Verify(b.Sign(c, later), seen("gw-b", c), later); err != nil && ReasonOf(err) != ReasonCacheFull {
			t.Fatal(err)
		}
	}
	if n := a.Nonces(); n > 64*shards {
		t.Fatalf("%d nonces cached, bound %d", n, 64*shards)
	}
}

// TestPropertyForwards drives one verifier with a random schedule of
// forwards from several signers, each followed at random times by replays
// with random changes, with a clock that moves (and skews) randomly. A model
// decides each answer; the verifier must agree, at every step. Replay a
// failure with -seed.
func TestPropertyForwards(t *testing.T) {
	seeds := []uint64{*seedFlag}
	if *seedFlag == 0 {
		seeds = seeds[:0]
		n := 200
		if testing.Short() {
			n = 50
		}
		for range n {
			seeds = append(seeds, rand.Uint64())
		}
	}
	for _, seed := range seeds {
		if err := runSchedule(seed); err != nil {
			t.Fatalf("seed %d (replay: go test ./gateway/peerauth -run TestPropertyForwards -seed %d): %v", seed, seed, err)
		}
	}
}

type sent struct {
	tok  string
	c    Claims // as signed (From set)
	made time.Time
	used bool
}

func runSchedule(seed uint64) error {
	v, err := New(Config{Secret: secret, Self: "gw-a", TTL: DefaultTTL, Skew: DefaultSkew})
	if err != nil {
		return err
	}
	return runScheduleWith(seed, v)
}

// runScheduleWith runs seed's schedule against the verifier v, which the
// model expects to keep the rules with DefaultTTL and DefaultSkew.
func runScheduleWith(seed uint64, v *Auth) error {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	now := time.UnixMilli(1_750_000_000_000 + int64(r.IntN(1e6)))
	signers := map[string]*Auth{}
	for _, s := range []string{"gw-a", "gw-b", "gw-c"} {
		signers[s], _ = New(Config{Secret: secret, Self: s})
	}
	var history []*sent
	for step := range 300 {
		now = now.Add(time.Duration(r.IntN(800)) * time.Millisecond)
		if r.IntN(4) > 0 || len(history) == 0 {
			// A fresh forward from a peer (its clock skewed).
			from := []string{"gw-b", "gw-c", "gw-a"}[r.IntN(3)]
			c := Claims{From: from, To: "gw-a", Caller: []string{"alice", "bob"}[r.IntN(2)], Method: "/m/" + fmt.Sprint(r.IntN(3)),
				Session: fmt.Sprint("s", r.IntN(4)), Digest: Digest([]byte(fmt.Sprint(r.IntN(4))))}
			skew := time.Duration(r.IntN(int(2*DefaultSkew))) - DefaultSkew
			tok := signers[from].Sign(c, now.Add(skew))
			s := &sent{tok: tok, c: c, made: now.Add(skew)}
			history = append(history, s)
			if err := check(v, s, c, now, step); err != nil {
				return err
			}
			continue
		}
		// A replay of an earlier token, changed or not.
		s := history[r.IntN(len(history))]
		c := s.c
		switch r.IntN(6) {
		case 1:
			c.Session += "x"
		case 2:
			c.Digest[r.IntN(32)] ^= 1 << r.IntN(8)
		case 3:
			c.Caller = "mallory"
		case 4:
			c.From = "gw-d"
		}
		if err := check(v, s, c, now, step); err != nil {
			return err
		}
	}
	return nil
}

// check verifies s.tok with claims c at now and compares with the model.
func check(v *Auth, s *sent, c Claims, now time.Time, step int) error {
	want := ""
	exp := s.made.Add(DefaultTTL).UnixMilli()
	switch {
	case c.From == "gw-a":
		want = ReasonSelf
	case exp+DefaultSkew.Milliseconds() < now.UnixMilli():
		want = ReasonExpired
	case exp > now.UnixMilli()+(DefaultTTL+DefaultSkew).Milliseconds():
		want = ReasonTooFar
	case c != s.c:
		want = ReasonMismatch
	case s.used:
		want = ReasonReplay
	}
	err := v.Verify(s.tok, c, now)
	if got := ReasonOf(err); got != want || (err == nil) != (want == "") {
		return fmt.Errorf("step %d: token of %+v made %v, verified at %v with %+v: %v, want reason %q", step, s.c, s.made, now, c, err, want)
	}
	if err == nil {
		s.used = true
	}
	return nil
}

// TestPropertyCatchesBrokenRules shows the property test catches removed
// rules: a verifier with no expiry (a skew of a day) accepts a stale proof,
// and one that forgets nonces accepts a replay.
func TestPropertyCatchesBrokenRules(t *testing.T) {
	caught := 0
	for seed := range uint64(20) {
		v := newAuth(t, "gw-a", func(c *Config) { c.Skew = 24 * time.Hour })
		if err := runScheduleWith(seed, v); err != nil {
			caught++
		}
	}
	if caught == 0 {
		t.Fatal("20 schedules against a verifier without expiry passed the model")
	}
	t.Logf("no expiry: caught by %d of 20 schedules", caught)
	caught = 0
	for seed := range uint64(20) {
		v := newAuth(t, "gw-a", nil)
		v.nonces = newNonceCache(0, DefaultMaxNonces) // keeps nothing
		if err := runScheduleWith(seed, v); err != nil {
			caught++
		}
	}
	if caught == 0 {
		t.Fatal("20 schedules against a verifier without its nonce cache passed the model")
	}
	t.Logf("no nonce cache: caught by %d of 20 schedules", caught)
}

// TestReplayCaughtByModel is the nonce rule's case written out: the model's
// check flags a verifier without its nonce cache at the first replay.
func TestReplayCaughtByModel(t *testing.T) {
	a := newAuth(t, "gw-a", nil)
	b := newAuth(t, "gw-b", nil)
	now := time.Now()
	c := claims("s", "x")
	tok := b.Sign(c, now)
	if err := a.Verify(tok, seen("gw-b", c), now); err != nil {
		t.Fatal(err)
	}
	a.nonces = newNonceCache(0, DefaultMaxNonces) // keep nothing
	s := &sent{tok: tok, c: seen("gw-b", c), made: now, used: true}
	if err := check(a, s, s.c, now.Add(time.Millisecond), 0); err == nil || !bytes.Contains([]byte(err.Error()), []byte(`want reason "replay"`)) {
		t.Fatalf("a verifier without its nonce cache passed the model's check: %v", err)
	}
}

func FuzzVerify(f *testing.F) {
	// A fixed nonce prefix: fuzz workers make the same seed token.
	b, _ := New(Config{Secret: secret, Self: "gw-b", Rand: bytes.NewReader(make([]byte, 8))})
	now := time.UnixMilli(1_700_000_000_000)
	seedTok := b.Sign(claims("s1", "x"), now)
	f.Add(seedTok, "gw-b", "alice", "s1", []byte("x"), int64(0))
	f.Add("", "", "", "", []byte{}, int64(0))
	f.Add(fmt.Sprintf("%d.%064x", now.UnixMilli(), 7), "gw-b", "alice", "s1", []byte("x"), int64(5))
	f.Fuzz(func(t *testing.T, tok, from, caller, session string, body []byte, dt int64) {
		a, _ := New(Config{Secret: secret, Self: "gw-a"})
		c := Claims{From: from, To: "gw-a", Caller: caller, Method: "/sessiongate.v1.SessionGateway/RunJob", Session: session, Digest: Digest(body)}
		at := now.Add(time.Duration(dt) * time.Millisecond)
		err := a.Verify(tok, c, at)
		var e *Error
		if err != nil && !errors.As(err, &e) {
			t.Fatalf("error %v is not an *Error", err)
		}
		if err == nil {
			// Only the seed's token, which gw-b signed for exactly these
			// claims, can pass.
			signed := claims("s1", "x")
			signed.From = "gw-b"
			if c != signed || tok != seedTok {
				t.Fatalf("accepted %q for claims %+v", tok, c)
			}
			if err := a.Verify(tok, c, at); ReasonOf(err) != ReasonReplay {
				t.Fatalf("second use: %v, want replay", err)
			}
		}
	})
}

func BenchmarkSignVerify(b *testing.B) {
	s := newAuth(b, "gw-b", nil)
	v := newAuth(b, "gw-a", func(c *Config) { c.MaxNonces = 1 << 24 })
	c := claims("s1.gw-a.AAAAAAAAAAAAAAAAAAAAAA", "x")
	now := time.Now()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := v.Verify(s.Sign(c, now), seen("gw-b", c), now); err != nil {
				b.Fatal(err)
			}
		}
	})
}
