package directory_test

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/sessiongate/sessiongate/gateway/directory"
	"github.com/sessiongate/sessiongate/gateway/directory/redistest"
)

func TestParseKeyRing(t *testing.T) {
	k32 := base64.StdEncoding.EncodeToString(make([]byte, 32))
	k16 := base64.StdEncoding.EncodeToString(make([]byte, 16))
	raw32 := base64.RawURLEncoding.EncodeToString(make([]byte, 32))
	tests := []struct {
		name    string
		entries []string
		wantErr string // "" = ok
	}{
		{"one key", []string{"k1:" + k32}, ""},
		{"rotation", []string{"k2:" + k32, "k1:" + k32}, ""},
		{"unpadded url base64", []string{"k_1-x:" + raw32}, ""},
		{"spaces trimmed", []string{" k1:" + k32 + " "}, ""},
		{"none", nil, "no keys"},
		{"no colon", []string{k32}, "want id:base64key"},
		{"empty id", []string{":" + k32}, "key id"},
		{"bad id", []string{"k.1:" + k32}, "key id"},
		{"duplicate", []string{"k1:" + k32, "k1:" + k32}, "given twice"},
		{"short key", []string{"k1:" + k16}, "16 bytes, want 32"},
		{"not base64", []string{"k1:!!!!"}, "not base64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kr, err := directory.ParseKeyRing(tt.entries...)
			if tt.wantErr == "" {
				if err != nil || kr == nil {
					t.Fatalf("ParseKeyRing: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("ParseKeyRing error %v, want containing %q", err, tt.wantErr)
			}
			if strings.Contains(err.Error(), k32) {
				t.Fatalf("error quotes key material: %v", err)
			}
		})
	}
}

func TestSealOpen(t *testing.T) {
	old, cur := newKey("old"), newKey("new")
	kr1, _ := directory.ParseKeyRing(old)
	kr2, _ := directory.ParseKeyRing(cur, old) // rotated: new encrypts, old still decrypts
	kr3, _ := directory.ParseKeyRing(cur)      // old dropped

	c := kr1.Seal("s1", "token-1")
	if !strings.HasPrefix(c, "old:") || strings.Contains(c, "token-1") {
		t.Fatalf("sealed %q", c)
	}
	if c2 := kr1.Seal("s1", "token-1"); c2 == c {
		t.Fatal("two seals of one token are equal: nonce reused")
	}
	if got, err := kr2.Open("s1", c); err != nil || got != "token-1" {
		t.Fatalf("rotated ring Open = %q, %v", got, err)
	}
	if c := kr2.Seal("s1", "token-2"); !strings.HasPrefix(c, "new:") {
		t.Fatalf("rotated ring seals with %q", c)
	}
	var ke *directory.KeyError
	if _, err := kr3.Open("s1", c); !errors.As(err, &ke) || ke.KeyID != "old" || !strings.Contains(err.Error(), "unknown key id") {
		t.Fatalf("Open with the key rotated out: %v", err)
	}
	// Associated data: a ciphertext copied to another session does not open.
	if _, err := kr1.Open("s2", c); !errors.As(err, &ke) || !strings.Contains(err.Error(), "authentication failed") {
		t.Fatalf("Open under another session id: %v", err)
	}
	// Tampering.
	b := []byte(c)
	b[len(b)-3] ^= 1
	if _, err := kr1.Open("s1", string(b)); err == nil {
		t.Fatal("tampered ciphertext opened")
	}
	for _, bad := range []string{"nocolon", "old:***", "old:AAAA"} {
		if _, err := kr1.Open("s1", bad); !errors.As(err, &ke) || ke.Reason != "malformed" {
			t.Fatalf("Open(%q) = %v, want malformed", bad, err)
		}
	}
	if got, err := kr1.Open("s1", ""); got != "" || err != nil {
		t.Fatalf("Open(\"\") = %q, %v", got, err)
	}
}

// FuzzOpen: Open never panics, and what it opens was sealed for that session.
func FuzzOpen(f *testing.F) {
	kr, _ := directory.ParseKeyRing("k1:" + base64.StdEncoding.EncodeToString(make([]byte, 32)))
	f.Add("s1", kr.Seal("s1", "tok"))
	f.Add("s1", "k1:")
	f.Add("s1", "zz:AAAA")
	f.Add("", ":")
	f.Fuzz(func(t *testing.T, id, sealed string) {
		pt, err := kr.Open(id, sealed)
		if err == nil && sealed != "" && pt != "tok" {
			t.Fatalf("opened %q from %q", pt, sealed)
		}
	})
}

// TestKeyRotationOnRedis: a token written under the old key is still read
// after rotation, new writes use the new key, and a replica that dropped the
// old key too early gets a clear error.
func TestKeyRotationOnRedis(t *testing.T) {
	srv := redistest.Start(t)
	ctx := testCtx(t)
	rc := raw(t, srv)
	k1, k2 := newKey("k1"), newKey("k2")
	keys := func(k ...string) func(*directory.Config) { return func(c *directory.Config) { c.Keys = k } }
	before := open(t, srv, "a", keys(k1))
	if _, err := before.Claim(ctx, session("s")); err != nil {
		t.Fatal(err)
	}
	if _, err := before.Claim(ctx, session("s-old")); err != nil {
		t.Fatal(err)
	}

	after := open(t, srv, "b", keys(k2, k1))
	r, err := after.Takeover(ctx, "s")
	if err != nil || r.ResumeToken != "tok-s-1" {
		t.Fatalf("Takeover after rotation = %q, %v", r.ResumeToken, err)
	}
	if err := after.Update(ctx, "s", r.Epoch, directory.Change{ResumeToken: "tok-s-2"}); err != nil {
		t.Fatal(err)
	}
	if c, _ := rc.HGet(ctx, after.SessionKey("s"), "token").Result(); !strings.HasPrefix(c, "k2:") {
		t.Fatalf("new write stored %q, want key k2", c)
	}

	only2 := open(t, srv, "c", keys(k2))
	if r, err := only2.Takeover(ctx, "s"); err != nil || r.ResumeToken != "tok-s-2" {
		t.Fatalf("Takeover with only the new key = %q, %v", r.ResumeToken, err)
	}
	r, err = only2.Takeover(ctx, "s-old")
	var ke *directory.KeyError
	if !errors.As(err, &ke) || ke.KeyID != "k1" || ke.SessionID != "s-old" {
		t.Fatalf("Takeover of a record under a dropped key: %v", err)
	}
	if r.Owner != "c" || r.Epoch != 2 {
		t.Fatalf("the takeover itself happened: %+v", r)
	}
	t.Log(err)
}

// TestTokenBoundToSession: a ciphertext copied into another session's record
// does not decrypt.
func TestTokenBoundToSession(t *testing.T) {
	srv := redistest.Start(t)
	ctx := testCtx(t)
	rc := raw(t, srv)
	a := open(t, srv, "a")
	for _, id := range []string{"s1", "s2"} {
		if _, err := a.Claim(ctx, session(id)); err != nil {
			t.Fatal(err)
		}
	}
	c1, _ := rc.HGet(ctx, a.SessionKey("s1"), "token").Result()
	if err := rc.HSet(ctx, a.SessionKey("s2"), "token", c1).Err(); err != nil {
		t.Fatal(err)
	}
	_, err := a.Takeover(ctx, "s2")
	var ke *directory.KeyError
	if !errors.As(err, &ke) || !strings.Contains(err.Error(), "authentication failed") {
		t.Fatalf("Takeover of a copied token: %v", err)
	}
	if r, err := a.Takeover(ctx, "s1"); err != nil || r.ResumeToken != "tok-s1-1" {
		t.Fatalf("original still opens: %q, %v", r.ResumeToken, err)
	}
}
