package wsclient

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha1"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"
)

// Options configures Dial. The zero value is valid.
type Options struct {
	// TLSConfig is used for wss:// (and https://) URLs. nil means the
	// system roots; an empty ServerName is set from the URL's host. ALPN is
	// always "http/1.1".
	TLSConfig *tls.Config

	// Header holds extra request headers (e.g. Authorization). It must not
	// set the headers of the WebSocket handshake itself (Upgrade,
	// Connection, Sec-WebSocket-*) nor Content-Length or
	// Transfer-Encoding; Dial fails if it does. A Host entry replaces the
	// URL's host in the Host header. An Authorization entry takes
	// precedence over user:password in the URL.
	Header http.Header

	// Subprotocols are offered in Sec-WebSocket-Protocol, in order. None
	// are offered when it is empty.
	Subprotocols []string

	// ReadLimit is the largest message, in bytes after reassembly of
	// fragments, that Read accepts. <= 0 means 32 MiB.
	ReadLimit int64

	// NetDial dials the TCP connection; nil means a net.Dialer. It is called
	// with network "tcp" and the URL's host:port (port 80 or 443 by
	// default).
	NetDial func(ctx context.Context, network, addr string) (net.Conn, error)
}

const (
	// maxResponseHead bounds the handshake response's status line and
	// headers (and for a failed handshake, what may be read of its body).
	maxResponseHead = 16 << 10
	maxErrorBody    = 512
	acceptGUID      = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
)

// reservedHeaders are set by Dial; Options.Header may not set them.
var reservedHeaders = []string{
	"Upgrade", "Connection", "Sec-Websocket-Key", "Sec-Websocket-Version",
	"Sec-Websocket-Extensions", "Sec-Websocket-Protocol", "Sec-Websocket-Accept",
	"Content-Length", "Transfer-Encoding",
}

// Dial opens a WebSocket connection to rawURL (ws://, wss://, or their
// aliases http:// and https://). ctx bounds the TCP dial, the TLS handshake
// and the WebSocket handshake; once Dial returns, ctx no longer matters.
func Dial(ctx context.Context, rawURL string, o Options) (*Conn, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error repeats the URL, which may hold a password
		}
		return nil, fmt.Errorf("wsclient: dial: invalid URL: %w", err)
	}
	where := u.Redacted()
	secure := false
	switch strings.ToLower(u.Scheme) {
	case "ws", "http":
	case "wss", "https":
		secure = true
	default:
		return nil, fmt.Errorf("wsclient: dial %s: unsupported scheme %q (want ws or wss)", where, u.Scheme)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("wsclient: dial %s: the URL has no host", where)
	}
	port := u.Port()
	if port == "" {
		port = "80"
		if secure {
			port = "443"
		}
	}
	addr := net.JoinHostPort(u.Hostname(), port)

	var nonce [16]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return nil, fmt.Errorf("wsclient: dial %s: making the handshake key: %w", where, err)
	}
	key := base64.StdEncoding.EncodeToString(nonce[:])
	req, err := buildRequest(u, key, o)
	if err != nil {
		return nil, fmt.Errorf("wsclient: dial %s: %w", where, err)
	}

	dial := o.NetDial
	if dial == nil {
		var d net.Dialer
		dial = d.DialContext
	}
	nc, err := dial(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("wsclient: dial %s: %w", where, err)
	}
	c, err := handshake(ctx, nc, u, secure, req, key, o)
	if err != nil {
		_ = nc.Close()
		return nil, fmt.Errorf("wsclient: dial %s: %w", where, err)
	}
	return c, nil
}

// buildRequest writes the HTTP/1.1 upgrade request.
func buildRequest(u *url.URL, key string, o Options) ([]byte, error) {
	// Options.Header is checked first; its keys need not be canonical.
	host, hasAuth := u.Host, false
	names := make([]string, 0, len(o.Header))
	for name, values := range o.Header {
		canon := textproto.CanonicalMIMEHeaderKey(name)
		if !isToken(name) {
			return nil, fmt.Errorf("Options.Header: invalid header name %q", name)
		}
		if slices.Contains(reservedHeaders, canon) {
			return nil, fmt.Errorf("Options.Header must not set %s", canon)
		}
		for _, v := range values {
			if strings.ContainsAny(v, "\r\n\x00") {
				return nil, fmt.Errorf("Options.Header: value of %s contains CR, LF or NUL", canon)
			}
		}
		switch canon {
		case "Host":
			if len(values) > 0 && values[0] != "" {
				host = values[0]
			}
			continue // written below, once
		case "Authorization":
			hasAuth = hasAuth || len(values) > 0
		}
		names = append(names, name)
	}
	slices.Sort(names)
	if strings.ContainsAny(host, "\r\n\x00 ") {
		return nil, fmt.Errorf("invalid Host %q", host)
	}

	var b strings.Builder
	b.Grow(256)
	b.WriteString("GET ")
	b.WriteString(u.RequestURI()) // path and query, "/" if empty; never the fragment
	b.WriteString(" HTTP/1.1\r\nHost: ")
	b.WriteString(host)
	b.WriteString("\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: ")
	b.WriteString(key)
	b.WriteString("\r\nSec-WebSocket-Version: 13\r\n")
	if len(o.Subprotocols) > 0 {
		for _, p := range o.Subprotocols {
			if !isToken(p) {
				return nil, fmt.Errorf("invalid subprotocol %q", p)
			}
		}
		b.WriteString("Sec-WebSocket-Protocol: ")
		b.WriteString(strings.Join(o.Subprotocols, ", "))
		b.WriteString("\r\n")
	}
	if u.User != nil && !hasAuth {
		pass, _ := u.User.Password()
		b.WriteString("Authorization: Basic ")
		b.WriteString(base64.StdEncoding.EncodeToString([]byte(u.User.Username() + ":" + pass)))
		b.WriteString("\r\n")
	}
	for _, name := range names {
		for _, v := range o.Header[name] {
			b.WriteString(name)
			b.WriteString(": ")
			b.WriteString(v)
			b.WriteString("\r\n")
		}
	}
	b.WriteString("\r\n")
	return []byte(b.String()), nil
}

// isToken reports whether s is a non-empty RFC 7230 token.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case ch >= 'a' && ch <= 'z', ch >= 'A' && ch <= 'Z', ch >= '0' && ch <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", ch) >= 0:
		default:
			return false
		}
	}
	return true
}

// handshake runs TLS (for wss) and the WebSocket handshake on nc, bounded
// by ctx: its deadline becomes the connection's deadline, and its
// cancellation closes the connection.
func handshake(ctx context.Context, nc net.Conn, u *url.URL, secure bool, req []byte, key string, o Options) (*Conn, error) {
	stop := context.AfterFunc(ctx, func() { _ = nc.Close() })
	fail := func(what string, err error) error {
		stop()
		if ctxErr := ctx.Err(); ctxErr != nil {
			return fmt.Errorf("%s: %w (%w)", what, ctxErr, err)
		}
		if _, ok := ctx.Deadline(); ok && errors.Is(err, os.ErrDeadlineExceeded) {
			// The connection's deadline (ctx's) fired a moment before ctx.
			return fmt.Errorf("%s: %w (%w)", what, context.DeadlineExceeded, err)
		}
		return fmt.Errorf("%s: %w", what, err)
	}
	if dl, ok := ctx.Deadline(); ok {
		if err := nc.SetDeadline(dl); err != nil {
			return nil, fail("setting the handshake deadline", err)
		}
	}
	conn := nc
	if secure {
		var cfg *tls.Config
		if o.TLSConfig != nil {
			cfg = o.TLSConfig.Clone()
		} else {
			cfg = &tls.Config{}
		}
		if cfg.ServerName == "" {
			cfg.ServerName = u.Hostname()
		}
		cfg.NextProtos = []string{"http/1.1"}
		tc := tls.Client(nc, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			return nil, fail("TLS handshake", err)
		}
		conn = tc
	}
	if _, err := conn.Write(req); err != nil {
		return nil, fail("sending the handshake request", err)
	}

	lr := &io.LimitedReader{R: conn, N: maxResponseHead}
	br := bufioPool.Get().(*bufio.Reader)
	br.Reset(lr)
	defer func() {
		br.Reset(nil)
		bufioPool.Put(br)
	}()
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		if lr.N == 0 {
			err = fmt.Errorf("response head larger than %d bytes: %w", maxResponseHead, err)
		}
		return nil, fail("reading the handshake response", err)
	}
	subprotocol, err := checkResponse(resp, key, o.Subprotocols)
	if err != nil {
		stop()
		return nil, fmt.Errorf("handshake: %w", err)
	}
	if !stop() {
		return nil, fail("handshake", context.Cause(ctx))
	}
	if err := nc.SetDeadline(time.Time{}); err != nil {
		return nil, fmt.Errorf("clearing the handshake deadline: %w", err)
	}
	// Frames the server sent right after the response head may already be
	// in br: they move to the frame reader before br goes back to its pool.
	leftover, _ := br.Peek(br.Buffered())
	return newConn(conn, leftover, subprotocol, o.ReadLimit), nil
}

// checkResponse validates the server's handshake response and returns the
// selected subprotocol.
func checkResponse(resp *http.Response, key string, offered []string) (string, error) {
	if resp.StatusCode != http.StatusSwitchingProtocols {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		msg := fmt.Sprintf("server answered %q, want 101 Switching Protocols", resp.Proto+" "+resp.Status)
		if len(body) > 0 {
			msg += fmt.Sprintf("; body: %q", body)
		}
		return "", errors.New(msg)
	}
	if up := resp.Header.Get("Upgrade"); !strings.EqualFold(strings.TrimSpace(up), "websocket") {
		return "", fmt.Errorf("response has Upgrade %q, want websocket", up)
	}
	if !hasToken(resp.Header.Values("Connection"), "upgrade") {
		return "", fmt.Errorf("response has Connection %q, want a list with upgrade", strings.Join(resp.Header.Values("Connection"), ", "))
	}
	sum := sha1.Sum([]byte(key + acceptGUID))
	if got, want := resp.Header.Get("Sec-WebSocket-Accept"), base64.StdEncoding.EncodeToString(sum[:]); got != want {
		return "", fmt.Errorf("response has Sec-WebSocket-Accept %q, want %q", got, want)
	}
	if ext := resp.Header.Values("Sec-WebSocket-Extensions"); len(ext) > 0 {
		return "", fmt.Errorf("server selected extensions %q, none were offered", strings.Join(ext, ", "))
	}
	sub := resp.Header.Get("Sec-WebSocket-Protocol")
	if sub != "" && !slices.Contains(offered, sub) {
		return "", fmt.Errorf("server selected subprotocol %q, offered %q", sub, offered)
	}
	return sub, nil
}

// hasToken reports whether a comma-separated header list holds token,
// ignoring case.
func hasToken(values []string, token string) bool {
	for _, v := range values {
		for part := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(part), token) {
				return true
			}
		}
	}
	return false
}
