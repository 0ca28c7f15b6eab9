package main

import (
	"fmt"
	"io"

	"github.com/sessiongate/sessiongate/timeoutprofile"
)

// profileEnv layers the --timeout-profiles flag over the environment, so that
// the flag and TIMEOUTPROFILE_FILE mean the same thing.
func profileEnv(getenv func(string) string, file string) func(string) string {
	return func(k string) string {
		if k == "TIMEOUTPROFILE_FILE" && file != "" {
			return file
		}
		return getenv(k)
	}
}

// printProfiles implements "gateway profiles": the effective profile table
// after the file and environment, as a JSON list of TimeoutProfile objects.
func printProfiles(args []string, getenv func(string) string, stdout io.Writer) error {
	file := ""
	switch {
	case len(args) == 2 && (args[0] == "--timeout-profiles" || args[0] == "-timeout-profiles"):
		file = args[1]
	case len(args) != 0:
		return fmt.Errorf("usage: gateway profiles [--timeout-profiles FILE]")
	}
	cfg, err := timeoutprofile.LoadGlobal(profileEnv(getenv, file))
	if err != nil {
		return err
	}
	out, err := timeoutprofile.MarshalProfiles(cfg.Profiles())
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "%s\n", out)
	return err
}
