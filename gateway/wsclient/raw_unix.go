//go:build unix

package wsclient

import (
	"io"
	"net"
	"os"
	"syscall"
)

// setupRaw switches the reader to raw reads when the connection is a plain
// TCP or Unix socket. Only those exact types qualify: a wrapper type that
// happens to implement syscall.Conn may buffer or account bytes in its own
// Read, which raw reads would bypass.
func (c *Conn) setupRaw() {
	var sc syscall.Conn
	switch t := c.nc.(type) {
	case *net.TCPConn:
		sc = t
	case *net.UnixConn:
		sc = t
	default:
		return
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return
	}
	c.raw = rc
	c.rawFn = c.rawRead
}

// rawRead is the callback given to syscall.RawConn.Read. It reads into
// c.rdst if set, else appends to the read buffer, borrowing one from the
// pool only now that the descriptor may be readable. When the descriptor
// has nothing (EAGAIN) and the reader holds no unconsumed bytes, the buffer
// goes back to the pool before the runtime parks the goroutine in the
// poller, so a connection waiting for data pins no buffer.
func (c *Conn) rawRead(fd uintptr) bool {
	var p []byte
	if c.rdst != nil {
		p = c.rdst
	} else {
		if c.rbuf == nil {
			c.rbuf = getReadBuf()
			c.rr, c.rw = 0, 0
		}
		p = (*c.rbuf)[c.rw:]
	}
	for {
		n, err := syscall.Read(int(fd), p)
		switch {
		case err == nil && n > 0:
			c.rn, c.rerr = n, nil
			if c.rdst == nil {
				c.rw += n
			}
			return true
		case err == nil:
			c.rn, c.rerr = 0, io.EOF
			return true
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			if c.rdst == nil && c.rr == c.rw {
				c.releaseReadBuf()
			}
			if c.parkHook != nil {
				c.parkHook(c.heldReadBuffer())
			}
			return false
		default:
			c.rn, c.rerr = 0, os.NewSyscallError("read", err)
			return true
		}
	}
}
