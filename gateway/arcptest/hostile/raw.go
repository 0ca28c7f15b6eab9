package hostile

import (
	"bufio"
	"context"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/sessiongate/sessiongate/gateway/arcp"
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
		if !s.dribble(conn, []byte("HTTP/1.1 101 Switching Protocols\r\nX-Hostile-Slow: "), s.opts.Dribble) {
			return
		}
		for s.dribble(conn, []byte("a"), s.opts.Dribble) {
		}
	case ModeSlowWelcome:
		if _, err := io.WriteString(conn, head); err != nil {
			return
		}
		se := &session{srv: s, mode: m, id: "sess-slow-welcome"}
		if !s.dribble(conn, serverFrame(se.welcome()), s.opts.Dribble) {
			return
		}
		// Finished (only with a dribble fast enough): read until the peer
		// goes.
		_, _ = io.Copy(io.Discard, conn)
	case ModeSlowButSteady:
		every := s.opts.Dribble / 40
		if !s.dribble(conn, []byte(head), every) {
			return
		}
		s.serveSteady(conn, every)
	}
}

// serveSteady is ModeSlowButSteady after the upgrade: a minimal session
// over the raw connection (the gateway sends unfragmented, masked
// messages) whose welcome and results are dribbled a byte per every (2.5
// ms by default), so the upgrade and welcome take about a second, well
// inside an init timeout of a few seconds, and each result over half a
// second.
func (s *Server) serveSteady(conn net.Conn, every time.Duration) {
	rd := bufio.NewReader(conn)
	se := s.newSession(ModeSlowButSteady)
	for {
		op, data, err := readClientFrame(rd)
		if err != nil {
			return
		}
		switch op {
		case 8: // close: echo it and end
			_, _ = conn.Write([]byte{0x88, 0})
			return
		case 9: // ping
			_, _ = conn.Write(append([]byte{0x8a, byte(len(data))}, data...))
			continue
		case 1:
		default:
			continue
		}
		env, err := arcp.Decode(data, arcp.DecodeOptions{})
		if err != nil {
			continue
		}
		switch env.Type {
		case arcp.TypeHello:
			s.count(ModeSlowButSteady, func(st *Stats) { st.Hellos++ })
			if !s.dribble(conn, serverFrame(se.welcome()), every) {
				return
			}
		case arcp.TypePing:
			p, _ := arcp.DecodePayload[arcp.Ping](env)
			_, _ = conn.Write(serverFrame(frame(map[string]any{"type": arcp.TypePong, "session_id": se.id,
				"payload": map[string]any{"ping_nonce": p.Nonce}})))
		case arcp.TypeClose:
			_, _ = conn.Write(serverFrame(frame(map[string]any{"type": arcp.TypeClosed, "session_id": se.id, "payload": map[string]any{}})))
			return
		case arcp.TypeSubmit:
			sub, err := arcp.DecodePayload[arcp.Submit](env)
			if err != nil {
				continue
			}
			var in Input
			_ = json.Unmarshal(sub.Input, &in)
			s.markSeen(in.Token)
			s.count(ModeSlowButSteady, func(st *Stats) { st.Submits++ })
			job := s.newJobID(ModeSlowButSteady, in.Token)
			acc := frame(map[string]any{"type": arcp.TypeAccepted, "session_id": se.id, "job_id": job, "trace_id": env.TraceID,
				"payload": map[string]any{"job_id": job, "accepted_at": now(), "trace_id": env.TraceID}})
			if _, err := conn.Write(serverFrame(acc)); err != nil {
				return
			}
			se.seq++
			res := frame(map[string]any{"type": arcp.TypeResult, "session_id": se.id, "job_id": job, "event_seq": se.seq,
				"payload": map[string]any{"final_status": arcp.StatusSuccess, "result": Result{Token: in.Token, JobID: job}}})
			if !s.dribble(conn, serverFrame(res), every) {
				return
			}
		}
	}
}

// readClientFrame reads one masked client frame: its opcode and unmasked
// payload (at most 1 MiB).
func readClientFrame(rd *bufio.Reader) (byte, []byte, error) {
	var h [2]byte
	if _, err := io.ReadFull(rd, h[:]); err != nil {
		return 0, nil, err
	}
	n := uint64(h[1] & 0x7f)
	switch n {
	case 126:
		var b [2]byte
		if _, err := io.ReadFull(rd, b[:]); err != nil {
			return 0, nil, err
		}
		n = uint64(binary.BigEndian.Uint16(b[:]))
	case 127:
		var b [8]byte
		if _, err := io.ReadFull(rd, b[:]); err != nil {
			return 0, nil, err
		}
		n = binary.BigEndian.Uint64(b[:])
	}
	if n > 1<<20 {
		return 0, nil, errors.New("hostile: client frame too large")
	}
	var key [4]byte
	if h[1]&0x80 != 0 {
		if _, err := io.ReadFull(rd, key[:]); err != nil {
			return 0, nil, err
		}
	}
	data := make([]byte, n)
	if _, err := io.ReadFull(rd, data); err != nil {
		return 0, nil, err
	}
	for i := range data {
		data[i] ^= key[i%4]
	}
	return h[0] & 0x0f, data, nil
}

// dribble writes data a byte per every; false when the connection or the
// server ended.
func (s *Server) dribble(conn net.Conn, data []byte, every time.Duration) bool {
	t := time.NewTicker(every)
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
