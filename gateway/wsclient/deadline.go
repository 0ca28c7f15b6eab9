package wsclient

import "time"

// SetWriteDeadline sets the deadline of the connection's writes, with
// net.Conn's semantics (the zero time means none). A write that reaches it
// fails, and, since it may have left part of a frame on the wire, closes
// the connection, like any failed write. It applies to every writer,
// pongs and close frames included, until changed.
func (c *Conn) SetWriteDeadline(t time.Time) error { return c.nc.SetWriteDeadline(t) }
