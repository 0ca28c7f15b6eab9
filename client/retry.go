package client

import (
	"sync"

	"github.com/sessiongate/sessiongate/timeoutprofile"
)

// RetryJSONPath is where the published retry policy's JSON file will live
// in the repository (the Python and TypeScript clients load a copy of it).
//
// TODO(retry-json): timeoutprofile/ does not publish the JSON file yet;
// until it does, clients/generate.sh writes the output of
// timeoutprofile.RetryServiceConfig instead, and so does RetryServiceConfig
// here. Check the name when the file lands.
const RetryJSONPath = "timeoutprofile/retry_service_config.json"

var retryConfig = sync.OnceValues(func() (string, error) {
	return timeoutprofile.RetryServiceConfig(timeoutprofile.RetryPolicy{})
})

// RetryServiceConfig returns the gRPC service config (JSON) of sessiongate's
// published retry policy, which New applies unless WithoutRetry is given.
func RetryServiceConfig() (string, error) { return retryConfig() }
