package client

import (
	"sync"

	"github.com/sessiongate/sessiongate/timeoutprofile"
)

// RetryJSONPath is the published retry policy's JSON file in the
// repository, which the Python and TypeScript clients carry a copy of
// (clients/generate.sh). A test in timeoutprofile keeps it equal to
// timeoutprofile.RetryServiceConfig's output, which the Go client uses.
const RetryJSONPath = "timeoutprofile/retry_service_config.json"

var retryConfig = sync.OnceValues(func() (string, error) {
	return timeoutprofile.RetryServiceConfig(timeoutprofile.RetryPolicy{})
})

// RetryServiceConfig returns the gRPC service config (JSON) of sessiongate's
// published retry policy, which New applies unless WithoutRetry is given.
func RetryServiceConfig() (string, error) { return retryConfig() }
