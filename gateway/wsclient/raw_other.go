//go:build !unix

package wsclient

// setupRaw leaves the reader on plain net.Conn reads on systems without
// Unix file descriptors.
func (c *Conn) setupRaw() {}
