package client_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestREADMEExample runs client/README.md's example program verbatim,
// with the test gateway's address in place of 127.0.0.1:50051. The program
// is compiled inside this module through a build overlay, so nothing is
// written to the work tree.
func TestREADMEExample(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a program")
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "<!-- go-example:begin -->")
	block, _, ok2 := strings.Cut(rest, "<!-- go-example:end -->")
	if !ok || !ok2 {
		t.Fatal("client/README.md has no go-example block")
	}
	block = strings.TrimSpace(block)
	block = strings.TrimPrefix(block, "```go")
	block = strings.TrimSuffix(block, "```")
	src := strings.ReplaceAll(block, "127.0.0.1:50051", gw.Addr)

	dir := t.TempDir()
	file := filepath.Join(dir, "main.go")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	pkg, err := filepath.Abs("internal/readmeexample")
	if err != nil {
		t.Fatal(err)
	}
	overlay, _ := json.Marshal(map[string]any{"Replace": map[string]string{filepath.Join(pkg, "main.go"): file}})
	overlayFile := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(overlayFile, overlay, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "run", "-overlay", overlayFile, "./internal/readmeexample")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("README example: %v\n%s", err, out)
	}
	for _, want := range []string{"map[hello:world n:3]", "result map[count:3]", "refused: input.ids[1]", "timed out"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
