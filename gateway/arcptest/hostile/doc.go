// Package hostile is a scripted hostile ARCP 1.1 runtime for tests: a
// WebSocket server on 127.0.0.1 (coder/websocket, and a hand-written
// upgrade for the slowloris modes) that performs the handshake and then
// follows a script per mode, served at /<mode>. It is not the reference
// runtime (gateway/arcpruntime): it exists to attack a gateway.
//
// MODES TABLE TBD
package hostile
