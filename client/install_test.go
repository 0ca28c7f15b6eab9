package client_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// installProgram is the program built in a fresh module by
// TestInstallRecipes: it imports the client as a user's module would.
const installProgram = `package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/sessiongate/sessiongate/client"
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.New(os.Args[1])
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	s, err := c.OpenSession(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close(ctx)
	res, err := s.Run(ctx, "echo", map[string]any{"installed": true})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Result)
}
`

// readmeBlock returns the sh block between <!-- name:begin --> and
// <!-- name:end --> of client/README.md.
func readmeBlock(t *testing.T, name string) string {
	t.Helper()
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "<!-- "+name+":begin -->")
	block, _, ok2 := strings.Cut(rest, "<!-- "+name+":end -->")
	if !ok || !ok2 {
		t.Fatalf("client/README.md has no %s block", name)
	}
	block = strings.TrimSpace(block)
	block = strings.TrimPrefix(block, "```sh")
	return strings.TrimSuffix(block, "```")
}

// TestInstallRecipes runs client/README.md's install recipes (go mod edit
// -replace, and go work) in a fresh module outside the repository, offline
// (GOPROXY=off: dependencies come from the module cache, as they would from
// the user's proxy), then builds and runs a program that uses the client.
func TestInstallRecipes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds programs")
	}
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	for _, recipe := range []string{"go-install", "go-work"} {
		t.Run(recipe, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			dir := t.TempDir()
			env := append(os.Environ(), "GOPROXY=off", "GOSUMDB=off", "GOWORK=", "GOFLAGS=")
			run := func(name string, args ...string) string {
				t.Helper()
				cmd := exec.CommandContext(ctx, name, args...)
				cmd.Dir, cmd.Env = dir, env
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
				}
				return string(out)
			}
			run("go", "mod", "init", "example.com/app")
			if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(installProgram), 0o644); err != nil {
				t.Fatal(err)
			}
			script := strings.ReplaceAll(readmeBlock(t, recipe), "/path/to/sessiongate", repo)
			run("sh", "-euc", script)
			if recipe == "go-install" {
				if mod, _ := os.ReadFile(filepath.Join(dir, "go.mod")); !strings.Contains(string(mod), "=> "+repo) {
					t.Fatalf("go.mod has no replace to the clone:\n%s", mod)
				}
			}
			run("go", "build", "-o", "app", ".")
			if out := run(filepath.Join(dir, "app"), gw.Addr); strings.TrimSpace(out) != "map[installed:true]" {
				t.Errorf("program printed %q", out)
			}
		})
	}
}
