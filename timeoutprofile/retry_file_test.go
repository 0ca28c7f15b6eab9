package timeoutprofile_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sessiongate/sessiongate/timeoutprofile"
)

var update = flag.Bool("update", false, "rewrite retry_service_config.json from RetryServiceConfig")

// TestRetryServiceConfigFile: retry_service_config.json, the retry policy
// the non-Go clients load, is RetryServiceConfig(RetryPolicy{}) indented by
// two spaces with a final newline, byte for byte. Regenerate it with
// go generate ./timeoutprofile (go test -run TestRetryServiceConfigFile -update).
func TestRetryServiceConfigFile(t *testing.T) {
	sc, err := timeoutprofile.RetryServiceConfig(timeoutprofile.RetryPolicy{})
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	if err := json.Indent(&want, []byte(sc), "", "  "); err != nil {
		t.Fatal(err)
	}
	want.WriteByte('\n')
	const path = "retry_service_config.json"
	if *update {
		if err := os.WriteFile(path, want.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Errorf("%s differs from RetryServiceConfig(RetryPolicy{}); run go generate ./timeoutprofile\ngot:\n%s\nwant:\n%s", path, got, want.Bytes())
	}
	// The file as loaded is a service config gRPC accepts.
	conn, err := grpc.NewClient("passthrough:///localhost:1", grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithDefaultServiceConfig(string(got)))
	if err != nil {
		t.Fatalf("gRPC rejects %s: %v", path, err)
	}
	conn.Close()
}
