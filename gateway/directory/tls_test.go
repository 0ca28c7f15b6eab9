package directory_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"strings"
	"testing"

	"github.com/sessiongate/sessiongate/gateway/directory"
	"github.com/sessiongate/sessiongate/gateway/directory/redistest"
)

// TestTLSURL: over rediss:// with AUTH and Config.TLSConfig trusting the
// server's CA, the directory works end to end; without that CA (the default
// roots) Open fails with a certificate verification error, and with a wrong
// or no password it fails with Redis's AUTH error; no error leaks the
// password.
func TestTLSURL(t *testing.T) {
	const password = "tls-s3cret"
	srv := redistest.Start(t, redistest.WithTLS(), redistest.WithPassword(password))
	ctx := testCtx(t)
	url := "rediss://:" + password + "@" + srv.Addr() + "/0"
	if srv.URL() != url || !strings.HasPrefix(srv.Addr(), "127.0.0.1:") {
		t.Fatalf("URL() = %q, want %q", srv.URL(), url)
	}
	where := "directory: redis at rediss://:xxxxx@" + srv.Addr() + "/0: ping: "
	cfg := directory.Config{Instance: "a", Advertise: "127.0.0.1:9001", Keys: testKeys, Prefix: "t:", TLSConfig: srv.TLSConfig()}

	d, err := directory.Open(ctx, url, cfg)
	if err != nil {
		t.Fatalf("Open(%s) with the CA: %v", url, err)
	}
	t.Cleanup(func() { _ = d.Close() })
	want := session("s-tls")
	if epoch, err := d.Claim(ctx, want); err != nil || epoch != 1 {
		t.Fatalf("Claim = %d, %v; want 1", epoch, err)
	}
	r, err := d.Get(ctx, want.ID)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	want.ResumeToken = "" // Get does not return the token
	if r.Session != want || r.Owner != "a" || r.Epoch != 1 || r.ExpiresIn <= 0 || r.UpdatedAt.IsZero() {
		t.Fatalf("Get = %+v, want %+v owned by a at epoch 1 with a TTL", r, want)
	}
	if _, err := d.Claim(ctx, session("s-tls")); !errors.Is(err, directory.ErrExists) {
		t.Fatalf("second Claim: %v, want ErrExists", err)
	}

	t.Run("default roots", func(t *testing.T) {
		noCA := cfg
		noCA.TLSConfig = nil
		_, err := directory.Open(ctx, url, noCA)
		var cve *tls.CertificateVerificationError
		if !errors.Is(err, directory.ErrUnavailable) || !errors.As(err, &cve) || !strings.HasPrefix(err.Error(), where) {
			t.Fatalf("Open without the CA: %v, want an unavailable error naming %s with a certificate verification error", err, where)
		}
		// The test CA is in no system pool; a machine without one says so.
		var unknown x509.UnknownAuthorityError
		var noRoots x509.SystemRootsError
		if !errors.As(err, &unknown) && !errors.As(err, &noRoots) {
			t.Fatalf("Open without the CA: %v, want an unknown authority error", err)
		}
		if len(cve.UnverifiedCertificates) == 0 || cve.UnverifiedCertificates[0].VerifyHostname("127.0.0.1") != nil {
			t.Fatalf("rejected certificate is not the server's for 127.0.0.1: %v", err)
		}
		if strings.Contains(err.Error(), password) {
			t.Fatalf("error leaks the password: %v", err)
		}
		t.Log(err)
	})

	for _, c := range []struct{ name, url, want string }{
		{"wrong password", "rediss://:wrong-pass@" + srv.Addr() + "/0", "WRONGPASS"},
		{"no password", "rediss://" + srv.Addr() + "/0", "NOAUTH"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := directory.Open(ctx, c.url, cfg)
			var cve *tls.CertificateVerificationError
			if !errors.Is(err, directory.ErrUnavailable) || errors.As(err, &cve) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Open(%s): %v, want an unavailable error with %s", c.url, err, c.want)
			}
			if !strings.Contains(err.Error(), "directory: redis at rediss://") || strings.Contains(err.Error(), "wrong-pass") {
				t.Fatalf("error does not name the directory or leaks the password: %v", err)
			}
			t.Log(err)
		})
	}
}
