package client_test

import (
	"bufio"
	"context"
	"errors"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sessiongate/sessiongate/client"
	"github.com/sessiongate/sessiongate/gateway/cluster/clustertest"
	gatewayv1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
)

// forwards sums sessiongate_cluster_forwards_total over the replicas.
func forwards(t *testing.T, c *clustertest.Cluster) int {
	t.Helper()
	n := 0
	for _, r := range c.Replicas {
		res, err := http.Get("http://" + r.Admin + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			if l := sc.Text(); strings.HasPrefix(l, "sessiongate_cluster_forwards_total{") {
				f, _ := strconv.ParseFloat(l[strings.LastIndexByte(l, ' ')+1:], 64)
				n += int(f)
			}
		}
		res.Body.Close()
	}
	return n
}

// TestSessionAffinity: with WithSessionAffinity over all three replicas,
// calls go to the session's owner: at most the first call of a session is
// forwarded between replicas.
func TestSessionAffinity(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c, err := clustertest.Start(ctx, clustertest.Options{})
	if errors.Is(err, clustertest.ErrNoBinary) && os.Getenv("CI") != "true" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var addrs []string
	for _, r := range c.Replicas {
		addrs = append(addrs, r.Addr)
	}
	cl, err := client.New("", client.WithReplicas(addrs...), client.WithSessionAffinity())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for range 3 {
		s, err := cl.OpenSession(ctx, &gatewayv1.OpenSessionRequest{ClientName: "affinity"})
		if err != nil {
			t.Fatal(err)
		}
		before := forwards(t, c)
		for range 10 {
			if _, err := s.Run(ctx, "echo", map[string]any{"n": 1}); err != nil {
				t.Fatal(err)
			}
		}
		if n := forwards(t, c) - before; n > 1 {
			t.Fatalf("%d of 10 calls of session %s were forwarded between replicas, want at most the first", n, s.ID())
		}
		if err := s.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}
