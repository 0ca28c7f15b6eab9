package server

import (
	"reflect"
	"testing"

	"google.golang.org/grpc/metadata"
)

// TestRelayHints: the hints a forwarder passes on are the owner's (else
// the route's), always with served-by this replica; equal hints share one
// map, different ones never do, and the cache stays bounded.
func TestRelayHints(t *testing.T) {
	c := &clusterState{self: "gw-2", cfg: ClusterConfig{Advertise: "127.0.0.1:2"}}
	want := func(owner, addr string) metadata.MD {
		return metadata.Pairs(MetadataOwner, owner, MetadataOwnerAddr, addr, MetadataServedBy, "gw-2")
	}
	fromOwner := metadata.Pairs(MetadataOwner, "gw-1", MetadataOwnerAddr, "127.0.0.1:1", "other", "x")
	h := c.relayHints(fromOwner, "gw-9", "127.0.0.1:9")
	if !reflect.DeepEqual(h, want("gw-1", "127.0.0.1:1")) {
		t.Fatalf("hints from the owner's answer = %v", h)
	}
	again := c.relayHints(metadata.Pairs(MetadataOwner, "gw-1", MetadataOwnerAddr, "127.0.0.1:1"), "gw-7", "x")
	if reflect.ValueOf(again).Pointer() != reflect.ValueOf(h).Pointer() {
		t.Fatal("equal answer hints made a second map")
	}
	moved := c.relayHints(metadata.Pairs(MetadataOwner, "gw-3", MetadataOwnerAddr, "127.0.0.1:3"), "gw-1", "127.0.0.1:1")
	if !reflect.DeepEqual(moved, want("gw-3", "127.0.0.1:3")) {
		t.Fatalf("hints naming another owner = %v", moved)
	}
	// Only an owner in the answer: no address is made up for it.
	onlyOwner := c.relayHints(metadata.Pairs(MetadataOwner, "gw-1"), "gw-1", "127.0.0.1:1")
	if !reflect.DeepEqual(onlyOwner, metadata.Pairs(MetadataOwner, "gw-1", MetadataServedBy, "gw-2")) {
		t.Fatalf("hints with the owner only = %v", onlyOwner)
	}
	// No hints in the answer (an error before the owner's routing): the
	// route's owner and address, which an answer naming them must not share.
	none := c.relayHints(nil, "gw-1", "127.0.0.1:1")
	if !reflect.DeepEqual(none, want("gw-1", "127.0.0.1:1")) {
		t.Fatalf("hints of an answer without any = %v", none)
	}
	if reflect.ValueOf(none).Pointer() == reflect.ValueOf(h).Pointer() {
		t.Fatal("route hints and answer hints share a cache entry")
	}
	// Several values: passed on as they are, not cached.
	many := metadata.MD{MetadataOwner: {"gw-1", "gw-3"}}
	got := c.relayHints(many, "gw-1", "127.0.0.1:1")
	if !reflect.DeepEqual(got, metadata.MD{MetadataOwner: {"gw-1", "gw-3"}, MetadataServedBy: {"gw-2"}}) {
		t.Fatalf("hints with two owners = %v", got)
	}
	if reflect.ValueOf(c.relayHints(many, "gw-1", "127.0.0.1:1")).Pointer() == reflect.ValueOf(got).Pointer() {
		t.Fatal("hints with several values were cached")
	}
	// A flood of distinct hints keeps at most maxRelayHints entries.
	for i := range 3 * maxRelayHints {
		c.relayHints(nil, "gw-x", string(rune('a'+i%26))+string(rune(i)))
	}
	n := 0
	c.relays.Range(func(any, any) bool { n++; return true })
	if n > maxRelayHints || n == 0 {
		t.Fatalf("%d cached hints after a flood, want 1..%d", n, maxRelayHints)
	}
}
