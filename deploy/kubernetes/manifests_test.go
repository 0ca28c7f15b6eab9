package kubernetes_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// The manifests are checked as Kubernetes would read them, without a
// cluster: every document of every YAML file here decodes strictly (an
// unknown or misspelt field fails) into its API type, and the gateway's
// containers are held to what the gateway needs:
//   - every SESSIONGATE_* / TIMEOUTPROFILE_* / OTEL_* variable is one the
//     gateway's flag set reads (from `gateway --help`) and has a row in the
//     README's Configuration table;
//   - the cluster secret, directory keys and tokens come from Secrets
//     (secretKeyRef), never inline, and no Secret is committed;
//   - startup, readiness and liveness probes are gRPC probes on the gRPC
//     port (grpc.health.v1);
//   - terminationGracePeriodSeconds covers the preStop sleep plus the
//     drain (--shutdown-timeout, the manifest's value or the gateway's
//     default), which also bounds the session hand-off; liveness does not
//     kill a draining gateway before that;
//   - the cluster runs 3 replicas in cluster mode with a PDB and Services
//     that select its pods, instance ids that fit the gateway's rule.

// object is one decoded document.
type object struct {
	file string
	kind string
	obj  any
}

// kustomization is the part of kustomize's Kustomization these manifests
// use; decoding it strictly fails on anything else.
type kustomization struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Labels     []struct {
		Pairs map[string]string `json:"pairs"`
	} `json:"labels,omitempty"`
	Resources []string `json:"resources"`
	Images    []struct {
		Name    string `json:"name"`
		NewName string `json:"newName,omitempty"`
		NewTag  string `json:"newTag,omitempty"`
	} `json:"images,omitempty"`
}

// decode decodes one YAML document strictly by its kind.
func decode(doc []byte) (string, any, error) {
	var meta struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := yaml.Unmarshal(doc, &meta); err != nil {
		return "", nil, err
	}
	var obj any
	switch meta.APIVersion + " " + meta.Kind {
	case "apps/v1 Deployment":
		obj = &appsv1.Deployment{}
	case "v1 Service":
		obj = &corev1.Service{}
	case "v1 ConfigMap":
		obj = &corev1.ConfigMap{}
	case "v1 Secret":
		obj = &corev1.Secret{}
	case "policy/v1 PodDisruptionBudget":
		obj = &policyv1.PodDisruptionBudget{}
	case "kustomize.config.k8s.io/v1beta1 Kustomization":
		obj = &kustomization{}
	default:
		return "", nil, fmt.Errorf("unexpected apiVersion %q kind %q: add it to decode", meta.APIVersion, meta.Kind)
	}
	if err := yaml.UnmarshalStrict(doc, obj); err != nil {
		return "", nil, fmt.Errorf("%s: %w", meta.Kind, err)
	}
	return meta.Kind, obj, nil
}

var docSep = regexp.MustCompile(`(?m)^---\s*$`)

// load decodes every document of every .yaml file under dir.
func load(t *testing.T, dir string) []object {
	t.Helper()
	var out []object
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(path) != ".yaml" {
			return err
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, doc := range docSep.Split(string(raw), -1) {
			if strings.TrimSpace(stripComments(doc)) == "" {
				continue
			}
			kind, obj, err := decode([]byte(doc))
			if err != nil {
				return fmt.Errorf("%s, document %d: %w", path, i+1, err)
			}
			out = append(out, object{file: path, kind: kind, obj: obj})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func stripComments(doc string) string {
	var b strings.Builder
	for _, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// TestStrictDecodingRejectsUnknownFields: the check is strict, so a typo
// in a manifest fails it. The real gateway.yaml with one field misspelt,
// or one field Kubernetes does not have, is refused.
func TestStrictDecodingRejectsUnknownFields(t *testing.T) {
	raw, err := os.ReadFile("gateway.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := decode(raw); err != nil {
		t.Fatalf("gateway.yaml as committed: %v", err)
	}
	for name, edit := range map[string][2]string{
		"misspelt field":      {"terminationGracePeriodSeconds:", "terminationGracePeriodSecond:"},
		"field of no type":    {"      containers:\n", "      containerz: []\n      containers:\n"},
		"probe field unknown": {"            grpc:\n              port: 50051\n            periodSeconds: 10", "            grpc:\n              port: 50051\n              path: /healthz\n            periodSeconds: 10"},
		"duplicate field":     {"  replicas: 3\n", "  replicas: 3\n  replicas: 2\n"},
	} {
		bad := strings.Replace(string(raw), edit[0], edit[1], 1)
		if bad == string(raw) {
			t.Fatalf("%s: the edit does not apply to gateway.yaml", name)
		}
		if _, _, err := decode([]byte(bad)); err == nil {
			t.Errorf("%s: decoded without error", name)
		}
	}
	if _, _, err := decode([]byte("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [a.yaml]\ncommonLabelz: {}\n")); err == nil {
		t.Error("a kustomization with an unknown field decoded without error")
	}
}

// gatewayFlags are the gateway's flags, their defaults and environment
// variables, read from `gateway --help` of a fresh build (cmd/gateway is a
// main package; its flag set is what the binary prints).
type gatewayFlags struct {
	defaults map[string]string // flag name → default ("" when none is printed)
	envs     map[string]string // environment variable → flag name
}

var (
	flagsOnce sync.Once
	flagsVal  *gatewayFlags
	flagsErr  error
)

func readGatewayFlags(t *testing.T) *gatewayFlags {
	t.Helper()
	flagsOnce.Do(func() { flagsVal, flagsErr = buildAndReadFlags() })
	if flagsErr != nil {
		t.Fatal(flagsErr)
	}
	return flagsVal
}

var (
	flagLine = regexp.MustCompile(`^  -([a-z0-9-]+)`)
	envRef   = regexp.MustCompile(`\(env ([A-Z0-9_]+)`)
	defRef   = regexp.MustCompile(`\(default ([^)]*)\)\s*$`)
)

func buildAndReadFlags() (*gatewayFlags, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "k8s-manifests")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "gateway")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/sessiongate/sessiongate/cmd/gateway").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build cmd/gateway: %v\n%s", err, out)
	}
	help, err := exec.CommandContext(ctx, bin, "--help").CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		return nil, fmt.Errorf("gateway --help: %v", err)
	}
	g := &gatewayFlags{defaults: map[string]string{}, envs: map[string]string{}}
	var name string
	var usage []string
	flush := func() {
		if name == "" {
			return
		}
		text := strings.Join(usage, " ")
		g.defaults[name] = ""
		if m := defRef.FindStringSubmatch(text); m != nil {
			g.defaults[name] = strings.Trim(m[1], `"`)
		}
		if m := envRef.FindStringSubmatch(text); m != nil {
			g.envs[m[1]] = name
		}
	}
	for _, line := range strings.Split(string(help), "\n") {
		if m := flagLine.FindStringSubmatch(line); m != nil {
			flush()
			name, usage = m[1], nil
			continue
		}
		usage = append(usage, strings.TrimSpace(line))
	}
	flush()
	if len(g.defaults) < 20 || g.envs["SESSIONGATE_SHUTDOWN_TIMEOUT"] != "shutdown-timeout" {
		return nil, fmt.Errorf("gateway --help did not read as a flag list (%d flags):\n%s", len(g.defaults), help)
	}
	return g, nil
}

// gatewayContainer is a container that runs the gateway image.
type gatewayContainer struct {
	file      string
	workload  string
	pod       *corev1.PodTemplateSpec
	c         *corev1.Container
	replicas  int32
	isSidecar bool
}

func gatewayContainers(objs []object) []gatewayContainer {
	var out []gatewayContainer
	for _, o := range objs {
		d, ok := o.obj.(*appsv1.Deployment)
		if !ok {
			continue
		}
		spec := &d.Spec.Template.Spec
		for i := range spec.Containers {
			if spec.Containers[i].Image == "sessiongate" {
				out = append(out, gatewayContainer{o.file, d.Name, &d.Spec.Template, &spec.Containers[i], *d.Spec.Replicas, false})
			}
		}
		for i := range spec.InitContainers {
			if spec.InitContainers[i].Image == "sessiongate" {
				out = append(out, gatewayContainer{o.file, d.Name, &d.Spec.Template, &spec.InitContainers[i], *d.Spec.Replicas, true})
			}
		}
	}
	return out
}

func env(c *corev1.Container, name string) *corev1.EnvVar {
	for i := range c.Env {
		if c.Env[i].Name == name {
			return &c.Env[i]
		}
	}
	return nil
}

// setting is a flag's value in the container: its variable's literal
// value, else the gateway's default.
func setting(t *testing.T, g *gatewayFlags, c *corev1.Container, flag string) string {
	t.Helper()
	for e, f := range g.envs {
		if f == flag {
			if v := env(c, e); v != nil && v.ValueFrom == nil {
				return v.Value
			}
		}
	}
	def, ok := g.defaults[flag]
	if !ok {
		t.Fatalf("the gateway has no flag --%s", flag)
	}
	return def
}

func seconds(t *testing.T, what, v string) float64 {
	t.Helper()
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("%s %q: %v", what, v, err)
	}
	return d.Seconds()
}

// handoffGrace is server.ClusterConfig's HandoffGrace default, which
// cmd/gateway keeps: how long a draining replica lets in-flight unary calls
// finish before it hands its sessions off (never past half the shutdown
// deadline).
const handoffGrace = 5 * time.Second

// secretVars must come from Secrets.
var secretVars = []string{"SESSIONGATE_CLUSTER_SECRET", "SESSIONGATE_DIRECTORY_KEYS", "SESSIONGATE_CLIENT_TOKENS", "SESSIONGATE_UPSTREAM_TOKEN"}

func TestManifests(t *testing.T) {
	objs := load(t, ".")
	g := readGatewayFlags(t)
	gws := gatewayContainers(objs)
	if len(gws) != 2 {
		t.Fatalf("want the gateway in two workloads (cluster, sidecar), found %d", len(gws))
	}
	for _, o := range objs {
		if s, ok := o.obj.(*corev1.Secret); ok && (len(s.Data) > 0 || len(s.StringData) > 0) {
			t.Errorf("%s: Secret %s has its data inline; Secrets are created apart (README.md here)", o.file, s.Name)
		}
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, configTable, _ := strings.Cut(string(readme), "\n## Configuration\n")
	configTable, _, _ = strings.Cut(configTable, "\n## ")
	for _, gw := range gws {
		t.Run(gw.workload, func(t *testing.T) {
			c := gw.c
			if len(c.Args) > 0 || len(c.Command) > 0 {
				t.Errorf("%s: configure the gateway by environment, not args/command (%q %q)", gw.file, c.Command, c.Args)
			}
			for _, e := range c.Env {
				if strings.HasPrefix(e.Name, "SESSIONGATE_") || strings.HasPrefix(e.Name, "TIMEOUTPROFILE_") || strings.HasPrefix(e.Name, "OTEL_") {
					if _, ok := g.envs[e.Name]; !ok {
						t.Errorf("%s: %s is not a variable of any gateway flag", gw.file, e.Name)
					}
					if !strings.Contains(configTable, "`"+e.Name+"`") {
						t.Errorf("%s: %s has no row in the README's Configuration table", gw.file, e.Name)
					}
				}
			}
			for _, name := range secretVars {
				e := env(c, name)
				if e == nil {
					continue
				}
				if e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
					t.Errorf("%s: %s must come from a Secret (secretKeyRef), not inline", gw.file, name)
				}
			}
			for _, from := range c.EnvFrom {
				if from.ConfigMapRef != nil {
					t.Errorf("%s: envFrom a ConfigMap hides the settings from this test; use env", gw.file)
				}
			}

			// Probes: grpc.health.v1 on the gRPC port.
			listen := setting(t, g, c, "listen")
			_, port, _ := strings.Cut(listen, ":")
			for name, p := range map[string]*corev1.Probe{"startup": c.StartupProbe, "readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
				if p == nil || p.GRPC == nil {
					t.Errorf("%s: %s probe must be a gRPC probe (grpc.health.v1)", gw.file, name)
					continue
				}
				if fmt.Sprint(p.GRPC.Port) != port {
					t.Errorf("%s: %s probe on port %d, the gateway listens on %s", gw.file, name, p.GRPC.Port, listen)
				}
				if s := p.GRPC.Service; s != nil && *s != "" && *s != "sessiongate.v1.SessionGateway" {
					t.Errorf("%s: %s probe asks for service %q, which the gateway's health server does not serve", gw.file, name, *s)
				}
			}

			// Drain: grace ≥ preStop + shutdown timeout (which bounds the
			// hand-off), and liveness does not cut the drain short.
			shutdown := seconds(t, "shutdown-timeout", setting(t, g, c, "shutdown-timeout"))
			var preStop float64
			if l := c.Lifecycle; l != nil && l.PreStop != nil {
				if l.PreStop.Sleep == nil {
					t.Errorf("%s: preStop must be a sleep (the image has no shell)", gw.file)
				} else {
					preStop = float64(l.PreStop.Sleep.Seconds)
				}
			}
			spec := gw.pod.Spec
			if spec.TerminationGracePeriodSeconds == nil {
				t.Fatalf("%s: terminationGracePeriodSeconds unset (Kubernetes' 30 s is not derived from the drain)", gw.file)
			}
			grace := float64(*spec.TerminationGracePeriodSeconds)
			if grace < preStop+shutdown {
				t.Errorf("%s: terminationGracePeriodSeconds %v < preStop %v s + --shutdown-timeout %v s: the kubelet kills a draining gateway", gw.file, grace, preStop, shutdown)
			}
			if shutdown < 2*handoffGrace.Seconds() {
				t.Errorf("%s: --shutdown-timeout %v s cuts the hand-off's %v grace for in-flight calls (it gets at most half)", gw.file, shutdown, handoffGrace)
			}
			if lp := c.LivenessProbe; lp != nil {
				if window := float64(lp.PeriodSeconds * lp.FailureThreshold); window <= preStop+shutdown {
					t.Errorf("%s: liveness gives up after %v s, before a drain of %v s ends (a draining gateway answers NOT_SERVING)", gw.file, window, preStop+shutdown)
				}
			}

			// Memory: what the gateway may retain stays under the limit.
			if lim, ok := c.Resources.Limits[corev1.ResourceMemory]; !ok {
				t.Errorf("%s: no memory limit", gw.file)
			} else {
				var retained int64
				fmt.Sscan(setting(t, g, c, "max-retained-bytes"), &retained)
				if retained <= 0 || retained >= lim.Value()*3/4 {
					t.Errorf("%s: --max-retained-bytes %d is not well under the memory limit %s", gw.file, retained, lim.String())
				}
			}
			if _, ok := c.Resources.Requests[corev1.ResourceCPU]; !ok {
				t.Errorf("%s: no CPU request", gw.file)
			}
			if _, ok := c.Resources.Requests[corev1.ResourceMemory]; !ok {
				t.Errorf("%s: no memory request", gw.file)
			}

			// Instance ids: the pod's name, which must fit [a-z0-9-]{1,32}.
			id := env(c, "SESSIONGATE_INSTANCE_ID")
			if id == nil || id.ValueFrom == nil || id.ValueFrom.FieldRef == nil || id.ValueFrom.FieldRef.FieldPath != "metadata.name" {
				t.Errorf("%s: SESSIONGATE_INSTANCE_ID should be the pod's name (fieldRef metadata.name)", gw.file)
			} else if n := len(gw.workload) + len("-0123456789-abcde"); n > 32 {
				t.Errorf("%s: pods of Deployment %q get names of %d bytes; instance ids take at most 32", gw.file, gw.workload, n)
			}

			if gw.isSidecar {
				if r := gw.pod.Spec.InitContainers; len(r) == 0 || r[0].RestartPolicy == nil || *r[0].RestartPolicy != corev1.ContainerRestartPolicyAlways {
					t.Errorf("%s: the gateway sidecar must be a native sidecar (restartPolicy Always)", gw.file)
				}
				if env(c, "SESSIONGATE_REDIS") != nil {
					t.Errorf("%s: the sidecar runs alone, not in cluster mode", gw.file)
				}
				return
			}
			// The cluster.
			if gw.replicas != 3 {
				t.Errorf("%s: %d replicas, want 3", gw.file, gw.replicas)
			}
			if setting(t, g, c, "redis") == "" {
				t.Errorf("%s: no SESSIONGATE_REDIS: not cluster mode", gw.file)
			}
			for _, name := range []string{"SESSIONGATE_CLUSTER_SECRET", "SESSIONGATE_DIRECTORY_KEYS"} {
				if env(c, name) == nil {
					t.Errorf("%s: cluster mode needs %s", gw.file, name)
				}
			}
			if adv := setting(t, g, c, "advertise"); !strings.Contains(adv, "$(POD_IP)") || !strings.HasSuffix(adv, ":"+port) {
				t.Errorf("%s: SESSIONGATE_ADVERTISE %q: peers must dial the pod's IP on the gRPC port %s", gw.file, adv, port)
			}
			if preStop == 0 {
				t.Errorf("%s: no preStop sleep: balancers still send calls while the replica drains", gw.file)
			}
			checkClusterObjects(t, objs, gw)
		})
	}
}

// checkClusterObjects: the PDB and the Services select the cluster's pods,
// one Service is headless (the Go affinity client), every port is the
// gateway's.
func checkClusterObjects(t *testing.T, objs []object, gw gatewayContainer) {
	t.Helper()
	podLabels := labels.Set(gw.pod.Labels)
	var pdbs, headless, balanced int
	for _, o := range objs {
		if filepath.Dir(o.file) != filepath.Dir(gw.file) {
			continue
		}
		switch x := o.obj.(type) {
		case *policyv1.PodDisruptionBudget:
			sel := labels.SelectorFromSet(x.Spec.Selector.MatchLabels)
			if !sel.Matches(podLabels) {
				continue
			}
			pdbs++
			if x.Spec.MaxUnavailable == nil || x.Spec.MaxUnavailable.IntValue() != 1 || x.Spec.MinAvailable != nil {
				t.Errorf("%s: PDB %s: want maxUnavailable 1 (one replica drains at a time)", o.file, x.Name)
			}
		case *corev1.Service:
			if !labels.SelectorFromSet(x.Spec.Selector).Matches(podLabels) {
				continue
			}
			if x.Spec.ClusterIP == corev1.ClusterIPNone {
				headless++
			} else {
				balanced++
			}
			for _, p := range x.Spec.Ports {
				if !slices.ContainsFunc(gw.c.Ports, func(cp corev1.ContainerPort) bool { return cp.Name == p.TargetPort.String() }) {
					t.Errorf("%s: Service %s targets port %s, which the gateway container does not name", o.file, x.Name, p.TargetPort.String())
				}
			}
		}
	}
	if pdbs != 1 || headless != 1 || balanced != 1 {
		t.Errorf("want one PDB, one headless Service and one balanced Service for the gateway's pods; found %d, %d, %d", pdbs, headless, balanced)
	}
}

// TestKustomizations: each kustomization lists every manifest of its
// directory, and only files that exist.
func TestKustomizations(t *testing.T) {
	n := 0
	for _, o := range load(t, ".") {
		k, ok := o.obj.(*kustomization)
		if !ok {
			continue
		}
		n++
		dir := filepath.Dir(o.file)
		listed := map[string]bool{}
		for _, r := range k.Resources {
			if _, err := os.Stat(filepath.Join(dir, r)); err != nil {
				t.Errorf("%s lists %s: %v", o.file, r, err)
			}
			listed[r] = true
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if !e.IsDir() && filepath.Ext(e.Name()) == ".yaml" && e.Name() != "kustomization.yaml" && !listed[e.Name()] {
				t.Errorf("%s does not list %s", o.file, e.Name())
			}
		}
	}
	if n != 2 {
		t.Fatalf("want two kustomizations (cluster, sidecar), found %d", n)
	}
}

// TestReadmeNamesSecrets: README.md here tells how to create every Secret
// the manifests reference.
func TestReadmeNamesSecrets(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, gw := range gatewayContainers(load(t, ".")) {
		for _, e := range append(gw.c.Env, gw.pod.Spec.Containers[0].Env...) {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				ref := e.ValueFrom.SecretKeyRef
				if !bytes.Contains(readme, []byte(ref.Name)) || !bytes.Contains(readme, []byte(ref.Key)) {
					t.Errorf("README.md does not say how to create Secret %s with key %s", ref.Name, ref.Key)
				}
			}
		}
	}
}
