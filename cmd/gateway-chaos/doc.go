// Command gateway-chaos measures what callers of a sessiongate cluster see
// through a fleet's routine faults. It is an instrument: it reports what it
// sees and fails only on the thresholds it is told to enforce.
//
// # What it starts
//
// Everything on 127.0.0.1 and bounded in time (-short: a few minutes in
// all), through gateway/cluster/clustertest: a real redis-server on a unix
// socket, the reference runtime (`gateway runtime`), three replicas built
// from this module (`go build ./cmd/gateway`, or -gateway-bin) with
// --redis, --instance-id gw-1 … gw-3, --cluster-secret, --lease-ttl -ttl
// and --peer-first-byte min(1 s, TTL/4) (the default 1 s in full mode,
// 500 ms with the short mode's 2 s lease: a forward pending on a frozen
// owner learns of the takeover only when that bound ends); then Debian's
// nginx (-nginx) in front of them with the project's published recipe, the
// <!-- nginx:begin --> block of docs/balancers.md,
// docs/operations.md or README.md, the first that has one (-nginx-conf to
// name another), its addresses replaced by
// the replicas' ports. Every start waits for readiness (grpc.health.v1
// SERVING for a replica, PING for Redis, a TCP accept for nginx), never a
// fixed sleep. Cleanup kills every process it started by pid (nginx by its
// process group, a stopped process is continued first), also after a failure.
// Without redis-server or nginx the run fails.
//
// # The load
//
// Written against the generated stubs (gen/), over two routes, through
// which calls go in turn, each carrying x-sessiongate-session:
//
//   - "nginx": a grpc-go connection to nginx with the published retry policy
//     (timeoutprofile.RetryServiceConfig, the same as
//     timeoutprofile/retry_service_config.json) as its default service
//     config;
//   - "direct": the connection of the project's Go client (client.New with
//     WithReplicas of the three replicas and nothing else: its defaults, the
//     retry policy, its round robin, its silence bound, its reconnect
//     backoff), as a caller of the cluster would use it. There is no raw
//     single-address route: a caller connected to one frozen replica only
//     waits for the thaw whatever the servers do, and measures nothing of
//     them.
//
// RunJob and SubmitJob carry a fresh idempotency key per call, the same on
// every attempt, as the project's clients send.
//
//   - -sessions sessions, each with a RunJob(echo) loop (-think between a
//     success and the next call, 50 ms after a failure); every call carries
//     a unique token that the result must echo (another token: misdelivered).
//   - -watchers loops of SubmitJob(stream) + WatchJob. Each job has its own
//     event count (-events plus a little), and every event names it, so an
//     event of another job is a misdelivery. Every index must arrive exactly
//     once and in order, event_seq must grow. A broken watch is resumed from
//     its last event_seq through the other connection, as a client would,
//     after a backoff of 50 ms doubling to 1 s; each resume is counted. A
//     watch with no progress for the give-up time is abandoned.
//   - one GetSessionStatus prober over the sessions, which also learns each
//     session's owner.
//
// A session that the gateway says is gone (NOT_FOUND, or reason
// SESSION_LOST) is counted lost and replaced by a new one, as a caller
// would, so that the following scenarios still have -sessions sessions.
//
// # Scenarios
//
// A baseline (no fault) and then each of -scenarios in turn, each after a
// warm-up in which every session must answer, and each followed by a
// recovery wait (every session answers again) and the restoration of the
// cluster (every replica SERVING):
//
//	rolling       SIGTERM of each replica in turn, restarted and SERVING before the next
//	kill          SIGKILL of the replica that owns the most sessions
//	freeze        SIGSTOP of that replica for 2 × TTL, then SIGCONT
//	redis-freeze  SIGSTOP of redis-server for 2 × TTL, then SIGCONT
//
// # Figures and thresholds
//
// A scenario's figures cover its window: from its warm-up to the start of
// the next scenario, so the recovery and the restoration (a killed replica
// started again) are counted in it.
//
// Per scenario: calls by method and outcome ("OK", "OK after retry": a
// call grpc-go's retry policy retried to success, not a failure; else the
// gRPC code and ErrorInfo reason, "-" when there is none); each session's
// outage, the longest gap between two of its successful calls of any kind
// (max and p50 over the sessions; p50 over the victim's sessions); events
// lost (an index never delivered although the job ended or a later index
// came), doubled, out of order; events undelivered by watches that gave up;
// misdeliveries; sessions lost; watch cuts by code and reason, and resumes;
// the longest RunJob and SubmitJob call of each route (a call held by a
// frozen replica itself, which a client connected to it cannot avoid, shows
// there).
//
// Counts of failed calls depend on the load's pace: a loop whose call
// failed waits 50 ms before its next call, as a caller would. The retry
// policy's retry budget (retryThrottling: 10 tokens, 0.1 back per success)
// is per connection, shared by all the loops on it, so under a fault it
// can stop retries after a few failures: that is the published policy, and
// the figures say what its users see.
//
// Safety thresholds, always enforced (exit 1): 0 misdelivered, 0 events
// lost, doubled or out of order. Availability thresholds, enforced by
// default in both modes (-short too since the fixes listed at
// enforceAvailabilityShort; -enforce-availability=false prints them only):
// 0 sessions lost and 0 watches given up in every scenario, 0 failed calls
// in the rolling restart (a failed unary call after the retry policy, or a
// watch cut with a code other than UNAVAILABLE), outage ≤ TTL + 1 s for
// kill and freeze.
//
// # Flags
//
//	-short                 CI mode: 9 sessions, 3 watchers of 20+ events, TTL 2 s (about 30 s in all)
//	-scenarios LIST        rolling,kill,freeze,redis-freeze (any subset, in the order given)
//	-ttl D                 the replicas' --lease-ttl (default 5s)
//	-sessions N            RunJob loops, one session each (default 40)
//	-watchers N, -events N SubmitJob + WatchJob loops and their jobs' events (default 15, 100)
//	-think D               a RunJob loop's pause after a success (default 20ms)
//	-gateway-bin PATH      the replicas' binary (default: built from this module)
//	-nginx PATH            nginx (default: PATH, then /usr/sbin/nginx)
//	-nginx-conf PATH       the recipe (default: docs/balancers.md, docs/operations.md or README.md)
//	-enforce-availability  fail on the availability thresholds too (default true; false with -short)
//	-log-dir DIR           on a failed run, every replica's whole log written here
//	-json                  the report as JSON
//
// Exit status: 0 when every enforced check passed, 1 when one failed or the
// run could not measure (a process did not start, a session did not answer
// before a fault), 2 for bad flags. The test (go test ./cmd/gateway-chaos)
// runs -short against real processes and fails on every enforced check
// (the safety ones; the availability ones are logged).
//
// # Goroutines
//
// Run owns them all: one per RunJob loop, one per watcher, one prober (in
// an errgroup-like WaitGroup awaited before Run returns), and clustertest's
// one per process, which its Close awaits.
package main
