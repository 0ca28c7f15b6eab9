package wsclient

import (
	"bufio"
	"sync"
)

// Buffer pools. Every buffer is held as a *[]byte whose length equals its
// capacity, so that Put does not allocate.
const (
	smallBuf  = 4 << 10  // read buffer; write buffer for small batches
	mediumBuf = 16 << 10 // write buffer for medium batches
	largeBuf  = 64 << 10 // write buffer for large batches; bigger writes stream through it
)

var (
	smallPool  = sync.Pool{New: func() any { b := make([]byte, smallBuf); return &b }}
	mediumPool = sync.Pool{New: func() any { b := make([]byte, mediumBuf); return &b }}
	largePool  = sync.Pool{New: func() any { b := make([]byte, largeBuf); return &b }}
)

// getReadBuf borrows the buffer the frame reader parses from.
func getReadBuf() *[]byte { return smallPool.Get().(*[]byte) }

// getWriteBuf borrows the smallest pooled buffer that holds n bytes, or the
// largest one if none does (the writer then streams through it).
func getWriteBuf(n int) *[]byte {
	switch {
	case n <= smallBuf:
		return smallPool.Get().(*[]byte)
	case n <= mediumBuf:
		return mediumPool.Get().(*[]byte)
	default:
		return largePool.Get().(*[]byte)
	}
}

// putBuf returns a buffer borrowed from one of the pools.
func putBuf(bp *[]byte) {
	switch cap(*bp) {
	case smallBuf:
		smallPool.Put(bp)
	case mediumBuf:
		mediumPool.Put(bp)
	case largeBuf:
		largePool.Put(bp)
	}
}

// bufioPool holds the readers used only while reading the handshake
// response. Their size bounds the bytes that may follow the response head in
// them, which must fit in one read buffer.
var bufioPool = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, smallBuf) }}
