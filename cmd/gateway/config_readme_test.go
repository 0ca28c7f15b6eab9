package main

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestConfigTableListsEveryFlag: README's Configuration table has a row for
// every flag of the gateway, naming the flag's environment variable (as its
// usage text does) in the same row, and no row for a flag that does not
// exist.
func TestConfigTableListsEveryFlag(t *testing.T) {
	var usage bytes.Buffer
	if _, err := parseOptions([]string{"-h"}, func(string) string { return "" }, &usage); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("parseOptions(-h) = %v, want flag.ErrHelp", err)
	}
	flags := map[string]string{} // flag -> its environment variable
	flagLine := regexp.MustCompile(`^  -([a-z0-9-]+)`)
	envOf := regexp.MustCompile(`\(env ([A-Z0-9_]+)`)
	var last string
	for line := range strings.Lines(usage.String()) {
		if m := flagLine.FindStringSubmatch(line); m != nil {
			last = m[1]
			flags[last] = ""
		}
		if m := envOf.FindStringSubmatch(line); m != nil && last != "" {
			flags[last] = m[1]
		}
	}
	if len(flags) < 20 {
		t.Fatalf("read %d flags from the usage text, want the gateway's 30 or more:\n%s", len(flags), usage.String())
	}

	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(readme), "\n## Configuration\n")
	if !ok {
		t.Fatal("README.md has no Configuration section")
	}
	rows := map[string]string{} // flag -> its row
	rowFlag := regexp.MustCompile("^\\| `--([a-z0-9-]+)")
	for line := range strings.Lines(table) {
		if strings.HasPrefix(line, "## ") {
			break
		}
		if m := rowFlag.FindStringSubmatch(line); m != nil {
			rows[m[1]] = line
		}
	}
	for name, env := range flags {
		row, ok := rows[name]
		switch {
		case !ok:
			t.Errorf("flag --%s (env %s) has no row in README's Configuration table", name, env)
		case env == "":
			t.Errorf("flag --%s names no environment variable in its usage text", name)
		case !strings.Contains(row, "`"+env+"`"):
			t.Errorf("README's row for --%s does not name its environment variable %s: %s", name, env, row)
		}
	}
	for name := range rows {
		if _, ok := flags[name]; !ok {
			t.Errorf("README's Configuration table has a row for --%s, which the gateway does not have", name)
		}
	}
}
