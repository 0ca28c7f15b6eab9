package peertls

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
)

// Files are the PEM files of a replica's peer TLS.
type Files struct {
	Cert string // certificate chain of this replica
	Key  string // its private key
	CA   string // the cluster's CA certificate(s)
}

// DefaultReloadEvery is how often the files are looked at, at most.
const DefaultReloadEvery = time.Second

// Options tune a TLS.
type Options struct {
	// ReloadEvery: the files are checked for changes at most this often
	// (default DefaultReloadEvery; negative: never).
	ReloadEvery time.Duration
	// OnReloadError is told of a changed file that failed to load (the
	// previous certificates stay in use).
	OnReloadError func(error)
}

// TLS is a replica's peer TLS material, reloaded when its files change. It
// is safe for concurrent use.
type TLS struct {
	files Files
	opts  Options

	mu      sync.Mutex
	checked time.Time        // guarded by mu: last look at the files
	stamp   [3]fileStamp     // guarded by mu: of cert, key, CA when loaded
	cert    *tls.Certificate // guarded by mu
	pool    *x509.CertPool   // guarded by mu
}

type fileStamp struct {
	size int64
	mod  time.Time
}

// Load reads f. All three files are required.
func Load(f Files, o Options) (*TLS, error) {
	if f.Cert == "" || f.Key == "" || f.CA == "" {
		return nil, errors.New("peertls: certificate, key and CA files are all required")
	}
	if o.ReloadEvery == 0 {
		o.ReloadEvery = DefaultReloadEvery
	}
	t := &TLS{files: f, opts: o}
	if err := t.load(); err != nil {
		return nil, err
	}
	t.checked = time.Now()
	return t, nil
}

func stampOf(path string) fileStamp {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}
	}
	return fileStamp{size: fi.Size(), mod: fi.ModTime()}
}

// load reads the files; the caller holds mu (or owns t).
func (t *TLS) load() error {
	stamp := [3]fileStamp{stampOf(t.files.Cert), stampOf(t.files.Key), stampOf(t.files.CA)}
	cert, err := tls.LoadX509KeyPair(t.files.Cert, t.files.Key)
	if err != nil {
		return fmt.Errorf("peertls: certificate %s and key %s: %w", t.files.Cert, t.files.Key, err)
	}
	raw, err := os.ReadFile(t.files.CA)
	if err != nil {
		return fmt.Errorf("peertls: CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(raw) {
		return fmt.Errorf("peertls: CA %s holds no PEM certificate", t.files.CA)
	}
	t.cert, t.pool, t.stamp = &cert, pool, stamp
	return nil
}

// current returns the certificate and CA pool, reloaded first if a file
// changed since they were read.
func (t *TLS) current() (*tls.Certificate, *x509.CertPool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if now := time.Now(); t.opts.ReloadEvery > 0 && now.Sub(t.checked) >= t.opts.ReloadEvery {
		t.checked = now
		if [3]fileStamp{stampOf(t.files.Cert), stampOf(t.files.Key), stampOf(t.files.CA)} != t.stamp {
			if err := t.load(); err != nil && t.opts.OnReloadError != nil {
				t.opts.OnReloadError(err)
			}
		}
	}
	return t.cert, t.pool
}

// verifyChain checks a peer's certificate chain against the CA for usage.
func (t *TLS) verifyChain(raw [][]byte, usage x509.ExtKeyUsage) error {
	if len(raw) == 0 {
		return errors.New("peertls: no certificate")
	}
	_, pool := t.current()
	certs := make([]*x509.Certificate, len(raw))
	for i, r := range raw {
		c, err := x509.ParseCertificate(r)
		if err != nil {
			return fmt.Errorf("peertls: peer certificate: %w", err)
		}
		certs[i] = c
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	_, err := certs[0].Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{usage}})
	return err
}

// serverConfig is the TLS configuration of a handshake on the gRPC port.
func (t *TLS) serverConfig() *tls.Config {
	cert, pool := t.current()
	return &tls.Config{
		Certificates: []tls.Certificate{*cert},
		ClientCAs:    pool,
		// Callers may use TLS without a certificate; a forwarding peer
		// must present one (Verified).
		ClientAuth: tls.VerifyClientCertIfGiven,
		NextProtos: []string{"h2"},
		MinVersion: tls.VersionTLS12,
	}
}

// clientConfig is the TLS configuration of a replica dialling a peer.
func (t *TLS) clientConfig() *tls.Config {
	return &tls.Config{
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			cert, _ := t.current()
			return cert, nil
		},
		// Peers are identified by the cluster CA, not by host name (see
		// the package doc): the standard verification, which checks
		// the name, is replaced by VerifyConnection's, which does not.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			raw := make([][]byte, len(cs.PeerCertificates))
			for i, c := range cs.PeerCertificates {
				raw[i] = c.Raw
			}
			return t.verifyChain(raw, x509.ExtKeyUsageServerAuth)
		},
		NextProtos: []string{"h2"},
		MinVersion: tls.VersionTLS12,
	}
}

// ClientCredentials are the transport credentials of peer connections.
func (t *TLS) ClientCredentials() credentials.TransportCredentials {
	return credentials.NewTLS(t.clientConfig())
}

// Verified says whether the call of ctx came over TLS with a client
// certificate that the cluster's CA signed.
func Verified(ctx context.Context) bool {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return false
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	return ok && len(info.State.VerifiedChains) > 0
}

// ServerCredentials are the gRPC port's transport credentials: TLS for
// connections that start with a TLS handshake, plaintext for the others.
func (t *TLS) ServerCredentials() credentials.TransportCredentials { return &sniffing{t: t} }

type sniffing struct{ t *TLS }

// plainInfo is the AuthInfo of a plaintext connection.
type plainInfo struct{ credentials.CommonAuthInfo }

func (plainInfo) AuthType() string { return "insecure" }

func (s *sniffing) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	var first [1]byte
	if _, err := raw.Read(first[:]); err != nil {
		return nil, nil, err
	}
	conn := &prefixConn{Conn: raw, first: first[:]}
	if first[0] != 0x16 { // not a TLS record of type handshake
		return conn, plainInfo{credentials.CommonAuthInfo{SecurityLevel: credentials.NoSecurity}}, nil
	}
	tc := tls.Server(conn, s.t.serverConfig())
	if err := tc.Handshake(); err != nil { // bounded by grpc-go's connection deadline on raw
		_ = tc.Close()
		return nil, nil, err
	}
	return tc, credentials.TLSInfo{State: tc.ConnectionState(), CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity}}, nil
}

func (s *sniffing) ClientHandshake(context.Context, string, net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("peertls: server credentials used to dial")
}

func (s *sniffing) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "tls", SecurityVersion: "1.2"}
}

func (s *sniffing) Clone() credentials.TransportCredentials { return &sniffing{t: s.t} }

func (s *sniffing) OverrideServerName(string) error { return nil }

// prefixConn is a connection whose first bytes were read already.
type prefixConn struct {
	net.Conn
	first []byte
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if len(c.first) > 0 {
		n := copy(p, c.first)
		c.first = c.first[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}
