//go:build race

package server

// raceEnabled: the race detector slows heavy tests down ~10×; they scale
// themselves down.
const raceEnabled = true
