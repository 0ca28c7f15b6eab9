// Package wsclient is a small RFC 6455 WebSocket client that holds no read
// or write buffer while a connection is idle.
//
// # Why
//
// Each gateway session keeps one mostly idle client WebSocket to an agent
// runtime. A general-purpose client pins a buffered reader and writer
// (typically 4 KiB each) per connection for its whole life; with many idle
// sessions that is a large share of the memory per session. Here buffers
// come from sync.Pools and are held only while a frame is being read or
// written.
//
// # What it implements
//
// Dial performs the HTTP/1.1 upgrade handshake over ws:// or wss:// (http://
// and https:// are accepted as aliases) and returns a *Conn. Supported:
// text and binary messages, fragmented messages from the server (reassembled
// by Read), ping/pong (pings are answered by the reader, pongs ignored), the
// closing handshake, extra request headers, Basic auth from the URL's
// user:password, and subprotocols when Options.Subprotocols asks for them
// (none are offered otherwise). Not supported: extensions (none is offered,
// so no permessage-deflate; a server that selects one fails the
// handshake), proxies (HTTP_PROXY and HTTPS_PROXY are ignored), sending
// fragmented messages, and UTF-8 validation: text messages and close
// reasons are passed on without checking that they are valid UTF-8 (the
// caller's JSON decoder copes).
//
// Client frames are masked with a fresh 4-byte key per frame from
// math/rand/v2, whose global source is a ChaCha8 generator seeded from the
// operating system's entropy, so keys are unpredictable as RFC 6455
// section 5.3 requires.
//
// # Concurrency
//
// One goroutine reads: Read calls are serialised, and each returns the next
// data message. Any number of goroutines may call Write, Close and CloseNow,
// concurrently with Read and with each other; a mutex serialises the
// writers, including the pongs and close frames the reader sends. Each
// message of a Write is one final frame; all the messages of one Write go
// out in one write to the connection when their frames fit in the largest
// pooled buffer (64 KiB), and stream through it otherwise.
//
// Close sends a close frame and waits for the peer's: the reading goroutine
// sees it (Read then returns a *CloseError), or, when no goroutine is
// reading, Close reads itself and discards data messages. The wait is
// bounded by 5 seconds and ends early if the connection ends; then the TCP
// connection is closed. CloseNow closes the TCP connection at once.
//
// # Idle buffers
//
// For a plain TCP or Unix connection (*net.TCPConn, *net.UnixConn), Read
// waits for data through syscall.RawConn.Read: the callback borrows a 4 KiB
// buffer from the pool only when it is about to call read(2), and when the
// socket has nothing (EAGAIN) and the reader holds no unconsumed bytes it
// returns the buffer before the goroutine parks in the runtime's poller. A
// connection whose reader is waiting for the next message therefore pins no
// buffer. Deadlines and Close keep working, as the poller wakes the reader.
// Once a message has been returned and nothing is left unconsumed, the read
// buffer goes back to the pool at once. For other connection types (TLS,
// wrapper types returned by Options.NetDial, net.Pipe) Read uses
// net.Conn.Read into a buffer borrowed for the call, which stays pinned
// while the reader is blocked (the TLS layer keeps its own buffers anyway).
//
// Bytes the server sent right after the handshake response are kept: the
// response is read through a pooled bufio.Reader and whatever follows the
// head moves to the frame reader.
//
// Write builds frames in a pooled buffer (4, 16 or 64 KiB, by size),
// masking eight bytes at a time, and returns it after the write.
//
// # Limits and bad input
//
// A message may be at most Options.ReadLimit bytes after reassembly (32 MiB
// by default). Frame lengths are checked against the limit before any
// allocation; a message buffer is allocated at its exact size up to 1 MiB
// and beyond that grows with the bytes that actually arrive, so a peer that
// declares a huge length and stalls pins at most 1 MiB. The handshake
// response head may be at most 16 KiB; the error for a non-101 response
// quotes its status line and up to 512 bytes of its body.
//
// Bad input from the server ends the connection; Read returns the error,
// and keeps returning it:
//
//   - reserved bits set (no extension is negotiated), an unknown opcode, a
//     masked frame, a control frame longer than 125 bytes or fragmented, a
//     continuation frame with no message to continue, a new data frame
//     inside a fragmented message, a 64-bit length with its top bit set, a
//     close frame with a 1-byte payload or a status code not allowed on the
//     wire: Read returns an error wrapping ErrProtocol, after sending a
//     close frame with status 1002 (protocol error) and closing the
//     connection;
//   - a message larger than ReadLimit: an error wrapping ErrMessageTooBig,
//     after a close frame with status 1009 (message too big);
//   - the peer's close frame: a *CloseError with its code and reason (code
//     1005 if it had none), after echoing the code in our close frame;
//   - the connection ending without a close frame: an error wrapping io.EOF
//     (between messages) or io.ErrUnexpectedEOF (inside one).
//
// Lengths are not required to use their minimal encoding. CloseStatus
// extracts the code of a *CloseError.
package wsclient
