package redistest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// certFiles are the PEM files redis-server is given.
type certFiles struct {
	ca, cert, key string
}

// writeCerts generates a throwaway CA and a server certificate for the IP
// 127.0.0.1 signed by it, writes them (and the server key) into dir, and
// returns the files and a pool holding only the CA.
func writeCerts(dir string) (certFiles, *x509.CertPool, error) {
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return certFiles{}, nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "redistest CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return certFiles{}, nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return certFiles{}, nil, err
	}

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return certFiles{}, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return certFiles{}, nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return certFiles{}, nil, err
	}

	f := certFiles{
		ca:   filepath.Join(dir, "ca.crt"),
		cert: filepath.Join(dir, "server.crt"),
		key:  filepath.Join(dir, "server.key"),
	}
	for _, w := range []struct {
		path, typ string
		der       []byte
	}{
		{f.ca, "CERTIFICATE", caDER},
		{f.cert, "CERTIFICATE", der},
		{f.key, "PRIVATE KEY", keyDER},
	} {
		b := pem.EncodeToMemory(&pem.Block{Type: w.typ, Bytes: w.der})
		if err := os.WriteFile(w.path, b, 0o600); err != nil {
			return certFiles{}, nil, err
		}
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return f, pool, nil
}
