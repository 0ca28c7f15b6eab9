package hostile

import (
	"context"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"time"
)

// serveRaw serves the slowloris modes on the hijacked TCP connection: the
// WebSocket upgrade is written by hand so that it (or the first frame
// after it) can be dribbled a byte at a time.
func (s *Server) serveRaw(w http.ResponseWriter, r *http.Request, m Mode) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		http.Error(w, "hostile: cannot hijack", http.StatusInternalServerError)
		return
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	stop := context.AfterFunc(s.ctx, func() { conn.Close() })
	defer stop()
	sum := sha1.Sum([]byte(r.Header.Get("Sec-WebSocket-Key") + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	head := "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " +
		base64.StdEncoding.EncodeToString(sum[:]) + "\r\n\r\n"
	switch m {
	case ModeSlowUpgrade:
		// The head never ends: after the status line, one header value
		// grows a byte at a time.
		if !s.dribble(conn, []byte("HTTP/1.1 101 Switching Protocols\r\nX-Hostile-Slow: ")) {
			return
		}
		for s.dribble(conn, []byte("a")) {
		}
	case ModeSlowWelcome:
		if _, err := io.WriteString(conn, head); err != nil {
			return
		}
		se := &session{srv: s, mode: m, id: "sess-slow-welcome"}
		if !s.dribble(conn, serverFrame(se.welcome())) {
			return
		}
		// Finished (only with a dribble fast enough): read until the peer
		// goes.
		_, _ = io.Copy(io.Discard, conn)
	}
}

// dribble writes data a byte per Options.Dribble; false when the
// connection or the server ended.
func (s *Server) dribble(conn net.Conn, data []byte) bool {
	t := time.NewTicker(s.opts.Dribble)
	defer t.Stop()
	for i := range data {
		if _, err := conn.Write(data[i : i+1]); err != nil {
			return false
		}
		select {
		case <-t.C:
		case <-s.ctx.Done():
			return false
		}
	}
	return true
}

// serverFrame is an unmasked, final text frame.
func serverFrame(payload []byte) []byte {
	var h []byte
	switch n := len(payload); {
	case n < 126:
		h = []byte{0x81, byte(n)}
	case n < 1<<16:
		h = []byte{0x81, 126, 0, 0}
		binary.BigEndian.PutUint16(h[2:], uint16(n))
	default:
		h = make([]byte, 10)
		h[0], h[1] = 0x81, 127
		binary.BigEndian.PutUint64(h[2:], uint64(n))
	}
	return append(h, payload...)
}
