package directory

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// KeyRing encrypts resume tokens at rest with AES-256-GCM. The first key
// encrypts; every key decrypts, so keys can be rotated: put the new key first,
// keep the old ones until every record written under them has been rewritten
// or has expired (the session TTL), then drop them.
//
// A KeyRing is immutable and safe for concurrent use.
type KeyRing struct {
	ids   []string // ids[0] encrypts
	aeads map[string]cipher.AEAD
}

// aadLabel versions the associated data; the session id follows it.
const aadLabel = "sessiongate/directory/token/v1\x00"

// ParseKeyRing builds a key ring from "id:base64key" entries, as they come
// from configuration. An id is 1 to 32 characters of [A-Za-z0-9_-]; a key is
// 32 bytes in standard or URL-safe base64 (padded or not). Ids must be unique.
// The first entry encrypts.
func ParseKeyRing(entries ...string) (*KeyRing, error) {
	if len(entries) == 0 {
		return nil, errors.New("directory: key ring: no keys (want id:base64key entries)")
	}
	kr := &KeyRing{aeads: make(map[string]cipher.AEAD, len(entries))}
	for i, e := range entries {
		id, b64, ok := strings.Cut(strings.TrimSpace(e), ":")
		if !ok {
			return nil, fmt.Errorf("directory: key ring: entry %d: want id:base64key", i)
		}
		if !validKeyID(id) {
			return nil, fmt.Errorf("directory: key ring: entry %d: key id %q: want 1-32 characters of [A-Za-z0-9_-]", i, id)
		}
		if _, dup := kr.aeads[id]; dup {
			return nil, fmt.Errorf("directory: key ring: key id %q given twice", id)
		}
		key, err := decodeKey(b64)
		if err != nil {
			// The error never quotes the key material.
			return nil, fmt.Errorf("directory: key ring: key %q: not base64", id)
		}
		if len(key) != 32 {
			return nil, fmt.Errorf("directory: key ring: key %q: %d bytes, want 32 (AES-256)", id, len(key))
		}
		block, err := aes.NewCipher(key)
		if err != nil {
			return nil, fmt.Errorf("directory: key ring: key %q: %w", id, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("directory: key ring: key %q: %w", id, err)
		}
		kr.ids = append(kr.ids, id)
		kr.aeads[id] = aead
	}
	return kr, nil
}

func decodeKey(s string) ([]byte, error) {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			return b, nil
		}
	}
	return nil, errors.New("not base64")
}

func validKeyID(id string) bool {
	if len(id) == 0 || len(id) > 32 {
		return false
	}
	for _, c := range []byte(id) {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// EncryptID is the id of the key that encrypts.
func (kr *KeyRing) EncryptID() string { return kr.ids[0] }

// KeyError says a stored token cannot be decrypted.
type KeyError struct {
	SessionID string
	KeyID     string // the key id the ciphertext names ("" if unreadable)
	Reason    string // "unknown key id", "malformed", "authentication failed"
}

func (e *KeyError) Error() string {
	if e.KeyID == "" {
		return fmt.Sprintf("directory: resume token of session %q: %s", e.SessionID, e.Reason)
	}
	return fmt.Sprintf("directory: resume token of session %q (key id %q): %s", e.SessionID, e.KeyID, e.Reason)
}

// seal encrypts a token for one session: "<keyid>:<base64url(nonce|ciphertext|tag)>".
// The associated data is the session id, so a ciphertext copied into another
// session's record does not decrypt.
func (kr *KeyRing) seal(sessionID, token string) string {
	id := kr.ids[0]
	aead := kr.aeads[id]
	buf := make([]byte, aead.NonceSize(), aead.NonceSize()+len(token)+aead.Overhead())
	if _, err := rand.Read(buf); err != nil {
		panic("directory: crypto/rand: " + err.Error()) // never fails on supported platforms
	}
	buf = aead.Seal(buf, buf, []byte(token), aad(sessionID))
	return id + ":" + base64.RawURLEncoding.EncodeToString(buf)
}

// open decrypts what seal produced. The empty string stays empty (no token).
func (kr *KeyRing) open(sessionID, sealed string) (string, error) {
	if sealed == "" {
		return "", nil
	}
	id, b64, ok := strings.Cut(sealed, ":")
	if !ok {
		return "", &KeyError{SessionID: sessionID, Reason: "malformed"}
	}
	aead, known := kr.aeads[id]
	if !known {
		return "", &KeyError{SessionID: sessionID, KeyID: id, Reason: "unknown key id (not in the key ring: was it rotated out too early?)"}
	}
	raw, err := base64.RawURLEncoding.DecodeString(b64)
	if err != nil || len(raw) < aead.NonceSize()+aead.Overhead() {
		return "", &KeyError{SessionID: sessionID, KeyID: id, Reason: "malformed"}
	}
	n := aead.NonceSize()
	pt, err := aead.Open(nil, raw[:n], raw[n:], aad(sessionID))
	if err != nil {
		return "", &KeyError{SessionID: sessionID, KeyID: id, Reason: "authentication failed (wrong key, or the token belongs to another session)"}
	}
	return string(pt), nil
}

func aad(sessionID string) []byte {
	return append([]byte(aadLabel), sessionID...)
}
