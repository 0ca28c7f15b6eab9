// Package peertls is mutual TLS between cluster replicas on the gateway's
// one gRPC port.
//
// A replica's gRPC port serves callers and peers alike. With peer TLS
// configured (a certificate, its key, and the cluster's CA), the port's
// transport credentials (ServerCredentials) look at the first byte a
// connection sends: a TLS ClientHello (0x16) is answered with a TLS
// handshake that asks for a client certificate and verifies one given
// against the CA; anything else (an HTTP/2 preface) is served in plaintext
// as before, so callers and balancers are unaffected. Verified(ctx) says
// whether a call came over TLS with a client certificate the CA signed:
// the gateway accepts forwarding headers only from such calls, so a peer
// link needs both the cluster secret (the forwarding proof, gateway/
// peerauth) and a certificate.
//
// Replicas dial each other with ClientCredentials: their certificate as the
// client certificate, and the peer's certificate verified against the CA.
// Peers are identified by the CA alone (any certificate it signed is a
// replica; host names are not checked, so one certificate may serve every
// replica and addresses may change): give the cluster a CA of its own.
//
// The certificate, key and CA files are read again when they change (their
// size or modification time, looked at no more than once per
// ReloadEvery, on a handshake), so that certificates can be rotated without
// a restart; a file that fails to load keeps the previous one in use and
// the error is reported to the OnReloadError callback. Nothing here starts
// a goroutine.
package peertls
