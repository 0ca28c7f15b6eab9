package wsclient

import (
	"encoding/binary"
	"math/bits"
)

// Opcodes (RFC 6455 section 5.2).
const (
	opContinuation = 0x0
	opText         = 0x1
	opBinary       = 0x2
	opClose        = 0x8
	opPing         = 0x9
	opPong         = 0xA
)

const (
	maxControlPayload = 125
	maxClientHeader   = 14 // 2 + 8 (64-bit length) + 4 (masking key)
)

// header is a parsed server frame header. Server frames are never masked.
type header struct {
	fin    bool
	op     byte
	length int64
}

// clientHeaderLen is the size of the header of a masked client frame
// carrying n payload bytes.
func clientHeaderLen(n int) int {
	switch {
	case n <= 125:
		return 6
	case n <= 0xffff:
		return 8
	default:
		return 14
	}
}

// appendClientHeader appends the header of a final, masked frame. The key's
// little-endian bytes are the masking key as sent.
func appendClientHeader(b []byte, op byte, n int, key uint32) []byte {
	switch {
	case n <= 125:
		b = append(b, 0x80|op, 0x80|byte(n))
	case n <= 0xffff:
		b = append(b, 0x80|op, 0x80|126, byte(n>>8), byte(n))
	default:
		b = append(b, 0x80|op, 0x80|127)
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	}
	return binary.LittleEndian.AppendUint32(b, key)
}

// maskCopy stores src XOR the masking key in dst[:len(src)] and returns the
// key rotated so that it continues the mask at the byte after src. key holds
// the four key bytes in little-endian order, starting at the phase of
// src[0]. It works eight bytes at a time, then finishes the tail byte-wise.
func maskCopy(dst, src []byte, key uint32) uint32 {
	dst = dst[:len(src)]
	k := uint64(key) | uint64(key)<<32
	i := 0
	for ; len(src)-i >= 32; i += 32 {
		s, d := src[i:i+32], dst[i:i+32]
		binary.LittleEndian.PutUint64(d[0:], binary.LittleEndian.Uint64(s[0:])^k)
		binary.LittleEndian.PutUint64(d[8:], binary.LittleEndian.Uint64(s[8:])^k)
		binary.LittleEndian.PutUint64(d[16:], binary.LittleEndian.Uint64(s[16:])^k)
		binary.LittleEndian.PutUint64(d[24:], binary.LittleEndian.Uint64(s[24:])^k)
	}
	for ; len(src)-i >= 8; i += 8 {
		binary.LittleEndian.PutUint64(dst[i:i+8], binary.LittleEndian.Uint64(src[i:i+8])^k)
	}
	// i is a multiple of 8, so the phase of src[i] is that of src[0].
	for j := 0; i < len(src); i, j = i+1, j+1 {
		dst[i] = src[i] ^ byte(key>>(8*uint(j&3)))
	}
	return bits.RotateLeft32(key, -8*(len(src)&3))
}
