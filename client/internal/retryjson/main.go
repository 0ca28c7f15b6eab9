// Command retryjson prints the gRPC service config of sessiongate's published
// retry policy, timeoutprofile.RetryServiceConfig with its defaults, as the
// JSON file the Python and TypeScript clients load. clients/generate.sh runs
// it while timeoutprofile/ publishes no JSON file of its own.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"

	"github.com/sessiongate/sessiongate/timeoutprofile"
)

func main() {
	sc, err := timeoutprofile.RetryServiceConfig(timeoutprofile.RetryPolicy{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "retryjson:", err)
		os.Exit(1)
	}
	var out bytes.Buffer
	if err := json.Indent(&out, []byte(sc), "", "  "); err != nil {
		fmt.Fprintln(os.Stderr, "retryjson:", err)
		os.Exit(1)
	}
	out.WriteByte('\n')
	os.Stdout.Write(out.Bytes())
}
