package prometheus_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.uber.org/goleak"
	"sigs.k8s.io/yaml"

	"github.com/sessiongate/sessiongate/gateway/cluster/clustertest"
	"github.com/sessiongate/sessiongate/gateway/directory"
	"github.com/sessiongate/sessiongate/gateway/server"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// ruleFile is Prometheus's rule file format, the fields alerting rules use;
// decoding it strictly fails on anything else (a misspelt field, a
// recording rule's "record" this file does not use).
type ruleFile struct {
	Groups []struct {
		Name     string `json:"name"`
		Interval string `json:"interval,omitempty"`
		Rules    []struct {
			Alert       string            `json:"alert"`
			Expr        string            `json:"expr"`
			For         string            `json:"for,omitempty"`
			Labels      map[string]string `json:"labels,omitempty"`
			Annotations map[string]string `json:"annotations,omitempty"`
		} `json:"rules"`
	} `json:"groups"`
}

func readRules(t *testing.T, raw []byte) *ruleFile {
	t.Helper()
	var f ruleFile
	if err := yaml.UnmarshalStrict(raw, &f); err != nil {
		t.Fatal(err)
	}
	return &f
}

// promqlWords are PromQL's functions, aggregations and keywords that can
// stand where a metric name stands.
var promqlWords = map[string]bool{
	"and": true, "or": true, "unless": true, "by": true, "without": true, "on": true, "ignoring": true,
	"group_left": true, "group_right": true, "bool": true, "offset": true,
	"sum": true, "max": true, "min": true, "avg": true, "count": true, "topk": true, "bottomk": true,
}

var (
	strLit     = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	braces     = regexp.MustCompile(`\{[^}]*\}`)
	brackets   = regexp.MustCompile(`\[[^\]]*\]`)
	labelLists = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	ident      = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*(\s*\()?`)
)

// metricNames returns the metric names of a PromQL expression: the
// identifiers left once strings, label matchers, ranges and label lists
// are removed, that are neither called (functions) nor keywords.
func metricNames(expr string) []string {
	e := strLit.ReplaceAllString(expr, `""`)
	e = braces.ReplaceAllString(e, "")
	e = brackets.ReplaceAllString(e, "")
	e = labelLists.ReplaceAllString(e, "$1")
	var out []string
	for _, m := range ident.FindAllString(e, -1) {
		if strings.HasSuffix(m, "(") || promqlWords[m] {
			continue
		}
		if !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out
}

func TestMetricNames(t *testing.T) {
	got := metricNames(`max by (instance, budget) (a_b / ignoring (scope) c_d{scope="gateway", x=~"y|z"}) > 0.9 and rate(e_total[5m]) unless sum without (grpc_code) (f) == bool 1`)
	if want := []string{"a_b", "c_d", "e_total", "f"}; !slices.Equal(got, want) {
		t.Fatalf("metricNames = %q, want %q", got, want)
	}
}

// prometheusOwn are series Prometheus makes itself, not the gateway.
var prometheusOwn = map[string]bool{"up": true}

// registeredMetrics returns the names every metric a cluster-mode gateway
// registers: the gateway built by server.New with a directory on a real
// redis-server, and the Go and process collectors cmd/gateway adds (its
// run.go). Descriptors, not samples: a labelled metric never observed is
// still named.
func registeredMetrics(t *testing.T) map[string]bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rd, err := clustertest.StartRedis(ctx)
	if errors.Is(err, clustertest.ErrNoBinary) && os.Getenv("CI") != "true" {
		t.Skip("redis-server not installed (apt-get install redis-server)")
	}
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	obs, err := server.NewDirectoryObserver(reg)
	if err != nil {
		t.Fatal(err)
	}
	var key [32]byte
	_, _ = rand.Read(key[:])
	d, err := directory.Open(ctx, rd.URL, directory.Config{Instance: "gw-rules", Advertise: "127.0.0.1:1",
		Keys: []string{"k1:" + base64.StdEncoding.EncodeToString(key[:])}, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	gw, err := server.New(server.Config{
		InstanceID: "gw-rules",
		Runtimes:   []server.Runtime{{Name: "default", URL: "ws://127.0.0.1:1/arcp"}},
		Registry:   reg,
		Cluster:    &server.ClusterConfig{Directory: d, Advertise: "127.0.0.1:1", Secret: "rules-test-secret-0123"},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := gw.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	}()
	ch := make(chan *prometheus.Desc)
	go func() { reg.Describe(ch); close(ch) }()
	fq := regexp.MustCompile(`fqName: "([^"]+)"`)
	names := map[string]bool{}
	for desc := range ch {
		if m := fq.FindStringSubmatch(desc.String()); m != nil {
			names[m[1]] = true
		}
	}
	for _, want := range []string{"grpc_server_handled_total", "sessiongate_cluster_forwards_total", "go_goroutines"} {
		if !names[want] {
			t.Fatalf("the registry does not name %s: the gateway was not assembled as cmd/gateway assembles it", want)
		}
	}
	return names
}

// TestRules: the rule file decodes strictly, every metric an expression
// names is registered by the gateway, and the alerts are those of
// docs/operations.md.
func TestRules(t *testing.T) {
	raw, err := os.ReadFile("sessiongate-alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	f := readRules(t, raw)
	names := registeredMetrics(t)
	ops, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("`(Sessiongate[A-Za-z]+)`").FindAllStringSubmatch(string(ops), -1) {
		documented[m[1]] = true
	}
	seen := map[string]bool{}
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" || r.Expr == "" {
				t.Errorf("group %s: a rule without alert or expr", g.Name)
				continue
			}
			if seen[r.Alert] {
				t.Errorf("alert %s twice", r.Alert)
			}
			seen[r.Alert] = true
			if r.For != "" {
				if _, err := time.ParseDuration(r.For); err != nil {
					t.Errorf("%s: for %q: %v", r.Alert, r.For, err)
				}
			}
			if r.Labels["severity"] == "" {
				t.Errorf("%s: no severity label", r.Alert)
			}
			if !documented[r.Alert] {
				t.Errorf("%s is not in docs/operations.md", r.Alert)
			}
			ms := metricNames(r.Expr)
			if len(ms) == 0 {
				t.Errorf("%s: no metric in %q", r.Alert, r.Expr)
			}
			for _, m := range ms {
				base := m
				for _, sfx := range []string{"_bucket", "_sum", "_count"} {
					if b, ok := strings.CutSuffix(m, sfx); ok && names[b] {
						base = b
					}
				}
				if !names[base] && !prometheusOwn[m] {
					t.Errorf("%s: metric %s is not registered by the gateway", r.Alert, m)
				}
			}
		}
	}
	for a := range documented {
		if !seen[a] {
			t.Errorf("docs/operations.md names alert %s, which %s does not define", a, "sessiongate-alerts.yaml")
		}
	}
}

// TestRulesStrict: a misspelt field fails the decoding, so the check above
// cannot pass on a rule Prometheus would refuse.
func TestRulesStrict(t *testing.T) {
	raw, err := os.ReadFile("sessiongate-alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(string(raw), "    rules:", "    rulez:", 1)
	var f ruleFile
	if err := yaml.UnmarshalStrict([]byte(bad), &f); err == nil {
		t.Fatal("a misspelt field decoded without error")
	}
}
