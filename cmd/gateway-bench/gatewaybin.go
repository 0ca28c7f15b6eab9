package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// modulePath is the module cmd/gateway belongs to.
const modulePath = "github.com/sessiongate/sessiongate"

// gatewayBinary returns the gateway binary section 9b runs: bin when it is
// given (-gateway-bin; it must be a file), else $SESSIONGATE_GATEWAY_BIN,
// else cmd/gateway built into dir from this module's source. The build runs
// in the module's directory, not the working directory, so the harness
// works from anywhere: `go run ./cmd/gateway-bench` in the module, or a
// built gateway-bench run elsewhere on the machine that built it.
func gatewayBinary(ctx context.Context, bin, dir string) (string, error) {
	if bin == "" {
		bin = os.Getenv("SESSIONGATE_GATEWAY_BIN")
	}
	if bin != "" {
		fi, err := os.Stat(bin)
		if err != nil {
			return "", fmt.Errorf("gateway binary: %w", err)
		}
		if fi.IsDir() {
			return "", fmt.Errorf("gateway binary %s is a directory", bin)
		}
		return bin, nil
	}
	mod, err := moduleDir(ctx)
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "gateway")
	build := exec.CommandContext(ctx, "go", "build", "-o", out, modulePath+"/cmd/gateway")
	build.Dir = mod
	if msg, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build cmd/gateway in %s: %v\n%s", mod, err, msg)
	}
	return out, nil
}

// errNoModule: neither this binary's source nor the working directory is
// in the module.
var errNoModule = errors.New("cannot find the sessiongate module to build cmd/gateway from: " +
	"run gateway-bench inside it, or pass -gateway-bin (or $SESSIONGATE_GATEWAY_BIN) naming a built gateway")

// moduleDir finds the module's root: first where this file was compiled
// from (its path is absolute unless built with -trimpath, and go run does
// not trim), then the module of the working directory, when it is this one.
func moduleDir(ctx context.Context) (string, error) {
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		if root := filepath.Dir(filepath.Dir(filepath.Dir(file))); isModule(root) {
			return root, nil
		}
	}
	gomod, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err == nil {
		if p := strings.TrimSpace(string(gomod)); p != "" && p != os.DevNull {
			if root := filepath.Dir(p); isModule(root) {
				return root, nil
			}
		}
	}
	return "", errNoModule
}

// isModule says whether dir holds this module's go.mod.
func isModule(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return false
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if f := strings.Fields(string(line)); len(f) == 2 && f[0] == "module" {
			return strings.Trim(f[1], `"`) == modulePath
		}
	}
	return false
}
