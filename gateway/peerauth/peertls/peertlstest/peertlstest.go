// Package peertlstest makes throwaway certificate authorities and replica
// certificates for tests of peer TLS (gateway/peerauth/peertls).
package peertlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/sessiongate/sessiongate/gateway/peerauth/peertls"
)

// CA is a certificate authority that lives in memory.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

var serials atomic.Int64

// NewCA makes a CA named name, valid for a day.
func NewCA(name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serials.Add(1)), Subject: pkix.Name{CommonName: name},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// Issue makes a replica certificate (server and client use, for 127.0.0.1
// and localhost) and returns its PEM, its key's PEM and its serial number.
func (ca *CA) Issue(name string) (certPEM, keyPEM []byte, serial *big.Int, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	now := time.Now()
	serial = big.NewInt(serials.Add(1))
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: name},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, nil, nil, err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), serial, nil
}

// WriteFiles issues a certificate named name and writes it, its key and the
// CA into dir as name.crt, name.key and ca.crt.
func (ca *CA) WriteFiles(dir, name string) (peertls.Files, *big.Int, error) {
	c, k, serial, err := ca.Issue(name)
	if err != nil {
		return peertls.Files{}, nil, err
	}
	f := peertls.Files{Cert: filepath.Join(dir, name+".crt"), Key: filepath.Join(dir, name+".key"), CA: filepath.Join(dir, "ca.crt")}
	if err := ReplaceFile(f.Cert, c); err != nil {
		return f, nil, err
	}
	if err := ReplaceFile(f.Key, k); err != nil {
		return f, nil, err
	}
	return f, serial, ReplaceFile(f.CA, ca.pem)
}

// ReplaceFile writes b to path atomically (a rename), as certificate
// rotation tools do.
func ReplaceFile(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// ClientConfig is a TLS client configuration that trusts ca (without
// checking names) and presents a certificate it issued when withCert.
func (ca *CA) ClientConfig(withCert bool) (*tls.Config, error) {
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	cfg := &tls.Config{RootCAs: pool, ServerName: "localhost", NextProtos: []string{"h2"}}
	if withCert {
		c, k, _, err := ca.Issue("client")
		if err != nil {
			return nil, err
		}
		pair, err := tls.X509KeyPair(c, k)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}
