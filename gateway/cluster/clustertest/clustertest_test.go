package clustertest

import (
	"net"
	"strconv"
	"testing"
)

// TestFreePort: the ports FreePort gives are below the kernel's ephemeral
// range (so no outgoing connection can take one before a replica binds it),
// at least minFreePort, and bindable on loopback.
func TestFreePort(t *testing.T) {
	low := ephemeralLow()
	for range 50 {
		addr, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		host, ps, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatal(err)
		}
		port, _ := strconv.Atoi(ps)
		if host != "127.0.0.1" || port < minFreePort || port >= low {
			t.Fatalf("FreePort() = %s, want 127.0.0.1 with a port in [%d, %d)", addr, minFreePort, low)
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("FreePort() = %s, not bindable: %v", addr, err)
		}
		l.Close()
	}
}
