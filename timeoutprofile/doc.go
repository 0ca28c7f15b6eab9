// Package timeoutprofile implements SW4-002 timeout profiles for any grpc-go
// service: every method runs under a named timeout budget (heartbeat 5 s,
// tool_call 30 s, …) instead of one universal timeout, callers may ask for
// more or less within the profile's bounds, and a budget that runs out ends
// the call with DEADLINE_EXCEEDED and details saying which profile, limit
// and durations were involved — also when the budget is the caller's own
// gRPC deadline, by ending the call a small margin before it.
//
// It depends on the standard library, grpc, protobuf and its own generated
// types (timeoutprofile.v1) only. Prometheus metrics live in the
// subpackage tpprom, which implements Observer.
//
// # Adopting it
//
//	cfg, err := timeoutprofile.LoadGlobal(os.Getenv) // standard + file + environment
//	tp, err := timeoutprofile.New(timeoutprofile.WithConfig(cfg), timeoutprofile.WithLogger(log))
//	srv := grpc.NewServer(
//		grpc.ChainUnaryInterceptor(tp.UnaryServerInterceptor()),
//		grpc.ChainStreamInterceptor(tp.StreamServerInterceptor()))
//	timeoutprofilev1.RegisterTimeoutProfileServiceServer(srv, timeoutprofile.NewService(tp))
//
// and on the client side
//
//	conn, err := grpc.NewClient(target,
//		grpc.WithChainUnaryInterceptor(tp.UnaryClientInterceptor()),
//		grpc.WithChainStreamInterceptor(tp.StreamClientInterceptor()))
//	resp, err := client.InvokeTool(ctx, req, timeoutprofile.CallTimeout(2*time.Minute))
//
// The interceptors have the standard signatures and compose in
// grpc.ChainUnaryInterceptor or go-grpc-middleware v2 chains. Put the server
// interceptors after authentication (the caller identity is read from the
// context) and close to the handler.
//
// # Profiles
//
// The twelve SW4-002 §1.2 profiles (StandardProfiles) plus "default", the
// fallback for methods nothing else selects (SW4-002 §8: 30 s, bounds
// 1 s–5 min, not infinite). Profile.Clamp applies the §2.2 rules to an
// explicit request: below min → min; above max → max; 0 without
// allow_infinite → default; otherwise as given.
//
// # Selection
//
// For a full method "/package.Service/Method", in order:
//
//  1. an explicit mapping in the configuration or WithMethodProfile: the
//     method's own key, then its service's "/package.Service/*";
//  2. the method's (timeoutprofile.v1.profile) option, read from the
//     descriptors registered in protoregistry.GlobalFiles (WithFiles);
//     an option naming an unknown profile is logged and ignored;
//  3. the SW4-002 §3 guidance table, matched on the service's short name:
//     the last element of its full name minus a "Service" suffix, case-
//     sensitive, in any package ("sw4rm.registry.v1.RegistryService",
//     "RegistryService" and "Registry" all match Registry);
//  4. the fallback (WithFallback, the configuration's "fallback", default
//     "default").
//
// The guidance table adds SW4RM's method names that §3 does not list:
// Tool.Call and Tool.CallStream → tool_call; Tool.Cancel and
// Scheduler.RequestPreemption → task_submit (they signal running work, like
// Scheduler.CancelTask); Handoff.CompleteHandoff → handoff;
// Handoff.GetPendingHandoffs → workflow_status and NegotiationRoom.GetVotes
// → negotiation_decision (read-only).
//
// # Sub-keys
//
// One method may do very different work: a gateway's RunJob runs a 2 s
// tool or a 2 h code review. WithSubKeys(fn, methods...) makes the calls
// of those methods carry sub-keys — fn names them from the request (for a
// stream, its first message), most specific first, e.g. "code-review@2.0.0"
// then "code-review" — and the configuration's "sub_keys" maps patterns
// (exact, or globs in path.Match syntax) to a profile and optionally a
// streaming policy. For each key in order, an exact pattern wins, then the
// glob with the most literal characters (then the first by pattern); a
// call nothing matches keeps its method's profile. The chosen profile
// bounds the call and names it in the details, the Observer (the metrics'
// profile label) and the log; per-caller overrides apply to it like any
// other. For streams the profile is chosen when the handler receives the
// first message, measured from the start of the call. Resolve does not
// see sub-keys; ResolveSubKey (and ResolveProfile's sub_key, passed to fn
// as a SubKeyQuery) does, and ListProfiles lists the mappings. This
// package does not know what a sub-key means.
//
// The streaming policy of a method is the configuration's (method key, then
// service key, WithStreamingPolicy overriding the file), else its
// (timeoutprofile.v1.streaming) option. An all-zero policy counts as none.
//
// Each method is resolved once and cached; afterwards finding a call's
// profile is an atomic load and a map lookup. Resolve and the
// TimeoutProfileService (NewService) report the profile, the rule that
// chose it (ProfileSource) and a reason. The service's ResolveProfile
// answers for the calling identity only (the WithCallerIdentity function
// applied to the ResolveProfile call): its request may leave caller empty
// or name that identity, and naming another caller is PERMISSION_DENIED,
// so that no caller reads another's overrides. ListProfiles shows the
// table without per-caller overrides.
//
// # Customisation and precedence
//
// Per-call > client > global > standard (SW4-002 §2.3):
//
//   - standard: StandardProfiles.
//   - global: the configuration file, then the environment (LoadGlobal),
//     passed with WithConfig. The environment overrides the file field by
//     field.
//   - client: the options of New — WithProfile (complete profiles),
//     WithMethodProfile, WithStreamingPolicy, WithFallback — override the
//     global layer. On the server, per-caller overrides (the file's
//     "callers", WithCallerProfile) apply on top for calls whose identity,
//     given by the WithCallerIdentity function, matches.
//   - per call: the request (below), clamped by the profile that results.
//
// # Environment
//
//	TIMEOUTPROFILE_FILE                     path of the JSON configuration file
//	TIMEOUTPROFILE_FALLBACK                 fallback profile name
//	TIMEOUTPROFILE_<PROFILE>_DEFAULT_MS     default_timeout_ms of a profile
//	TIMEOUTPROFILE_<PROFILE>_MIN_MS         min_timeout_ms
//	TIMEOUTPROFILE_<PROFILE>_MAX_MS         max_timeout_ms
//	TIMEOUTPROFILE_<PROFILE>_ALLOW_INFINITE true or false
//	TIMEOUTPROFILE_DEADLINE_MARGIN_MS       the deadline margin's ceiling (0 to 1000; 0 = off)
//	TIMEOUTPROFILE_STALL_MARGIN             true: the margin follows recent stalls (WithStallMargin; default false)
//	TIMEOUTPROFILE_SUB_KEYS                 sub-key mappings, "pattern=profile,…" (over the file's)
//
// <PROFILE> is the upper-cased profile name, e.g.
// TIMEOUTPROFILE_TOOL_CALL_MAX_MS. Only profiles that exist (standard or
// defined in the file) are looked up, so a variable for an unknown profile
// is ignored, not rejected; new profiles are defined in the file. Empty
// variables count as unset. Milliseconds are digits only.
//
// # Configuration file
//
// JSON only (YAML would need a dependency). Every section is optional;
// unknown fields, duplicate keys, negative or fractional numbers and
// unknown profile names are errors that name the field:
//
//	{
//	  "fallback": "default",
//	  "deadline_margin_ms": 100,
//	  "profiles": {
//	    "tool_call": {"max_timeout_ms": 7200000},
//	    "batch": {"default_timeout_ms": 600000, "min_timeout_ms": 1000,
//	              "max_timeout_ms": 7200000, "allow_infinite": true}
//	  },
//	  "methods": {
//	    "/acme.search.v1.Search/Query": "workflow_status",
//	    "/acme.batch.v1.Batch/*": "batch"
//	  },
//	  "streaming": {
//	    "/sessiongate.v1.SessionGateway/WatchJob":
//	      {"initial_timeout_ms": 30000, "message_gap_timeout_ms": 60000, "total_timeout_ms": 0}
//	  },
//	  "callers": {
//	    "batch-runner": {"tool_call": {"default_timeout_ms": 600000}}
//	  },
//	  "sub_keys": {
//	    "code-review": {"profile": "batch",
//	                    "streaming": {"initial_timeout_ms": 60000}},
//	    "echo*": {"profile": "tool_call"}
//	  }
//	}
//
// "profiles" overrides fields of a known profile, or defines a new one (then
// default_timeout_ms, min_timeout_ms and max_timeout_ms are required); every
// profile must keep 0 < default and min <= default <= max. "methods" maps a
// method or a whole service to a profile. "streaming" sets streaming
// policies (same keys; omitted fields are 0, i.e. not enforced). "callers"
// overrides profile fields for one caller identity. "sub_keys" maps
// sub-key patterns to profiles (see Sub-keys; "profile" is required,
// "streaming" optional). "fallback" names the
// fallback profile. "deadline_margin_ms" sets the deadline margin's
// ceiling (below).
//
// # The request of a call
//
// On the server, the request is the x-timeout-ms metadata (MetadataKey:
// decimal milliseconds, digits only, at most 10 digits; anything else is
// INVALID_ARGUMENT) if present, else the time left on the caller's gRPC
// deadline. x-timeout-ms is the only way to ask for no timeout ("0"). A
// request is clamped; a call with neither gets the profile's default, never
// "no timeout". The caller's own deadline always still bounds the call: the
// server may shorten it but never extends it — when clamping would (e.g. a
// 200 ms deadline on a profile with a 1 s minimum) the caller's deadline is
// kept, a warning logged and RuleKeptCallerDeadline counted. When the
// caller's deadline is the effective budget it is shortened by the deadline
// margin (below).
//
// Clamps and kept deadlines are logged through slog (WithLogger) at Warn,
// at most once per WithLogInterval per method and rule, with the number
// suppressed in between; they are also counted through the Observer.
//
// On the Go client, UnaryClientInterceptor gives a call without a deadline
// the profile's default as its deadline, and CallTimeout sets both the
// (clamped) deadline and x-timeout-ms; an allowed infinite request sends
// x-timeout-ms: 0 and sets no deadline. Its deadline and x-timeout-ms are
// equal, so the server's deadline margin applies and the details arrive.
//
// # Enforcement
//
// The handler runs under a context whose Deadline is the budget's end and
// which, when it runs out, is cancelled like one from
// context.WithDeadlineCause: Err is context.DeadlineExceeded and
// context.Cause is a *TimeoutError (which has a GRPCStatus method). The
// budget's end is the profile's when that comes more than the deadline
// margin before the caller's deadline (or the caller set none), else the
// caller's deadline less the margin (limit "caller_deadline"). With a
// margin of 0 and the caller's deadline first, the handler gets the
// incoming context unchanged. Either way a call whose budget ran out before
// its handler returned ends with DEADLINE_EXCEEDED carrying a
// timeoutprofile.v1.TimeoutExceeded and a google.rpc.ErrorInfo{reason:
// "TIMEOUT_PROFILE_EXCEEDED", domain: "timeoutprofile"}, whatever the
// handler returned; the message reads e.g. `timeout profile "tool_call"
// exceeded: 1000ms configured, 1003ms elapsed (unary)`. FromError decodes
// the detail on the caller's side.
//
// Streams: see StreamServerInterceptor. With a policy, the limits are the
// time to the first message the handler sends ("initial"), the pause
// between two ("gap") and a total ("total"): the clamped x-timeout-ms if
// the caller sent one, else the policy's total. Without a policy the
// profile's budget bounds the whole stream ("total").
//
// # The deadline margin
//
// A caller that sets only its own gRPC deadline (timeout= in Python,
// deadline in Node, a context deadline in Go) would otherwise race the
// server: the server's view of that deadline is a little later than the
// caller's (it starts counting when the request arrives), the caller's own
// timer fires first and it sees a bare DEADLINE_EXCEEDED without details —
// or, in Node, CANCELLED, when grpc-go's RST_STREAM at the server's
// deadline beats the client's timer. So when the caller's deadline is the
// effective budget (it ends before the profile's budget, or within the
// margin after it, or the caller sent only a deadline), the server
// interceptors end the call a margin before that deadline, with
// DEADLINE_EXCEEDED and both details, limit "caller_deadline", configured
// = the caller's remaining time less the margin. The handler's context has
// the shortened deadline; the rule "never extend a caller's deadline"
// holds, the end is always before the caller's deadline.
//
// The margin scales with the time the call has left when it arrives:
//
//	margin = min(ceiling, left / 3)
//
// so a call with 20 ms left gets about 13 ms of work and a 7 ms margin, one
// with 150 ms left 100 ms and 50 ms, and from 300 ms on the margin is the
// ceiling. A call with any time left runs — no deadline is too short to
// try — and only a call that arrives already past its deadline ends at
// once (configured 0) without running its handler. The ceiling is
// WithDeadlineMargin, the configuration's "deadline_margin_ms" or
// TIMEOUTPROFILE_DEADLINE_MARGIN_MS (option > environment > file >
// DefaultDeadlineMargin, 100 ms), 0 to 1000 ms; 0 turns the margin off and
// restores the race. Methods that answer from memory (health checks,
// status probes) take no margin at all (WithoutDeadlineMargin): they answer
// within any deadline the caller sets.
//
// Why a third, and why a ceiling of 100 ms: a fixed margin either refuses
// short deadlines outright (the earlier rule: "less than the margin left
// ends at once", which with 100 ms failed every call of 100 ms or less) or
// is too small for long ones. What a caller needs is the time its answer
// takes to travel back and be read before its own timer: the margin each
// call needed had a median of 7–13 ms and a 90th percentile of 14–33 ms
// (TestMeasureDeadlineMargin, below), independent of the deadline, and
// fixed margins of 100 ms kept the details for 99.2–100 % of calls. A
// third of the time left reaches 33 ms — the 90th percentile — at 100 ms
// and 50 ms at 150 ms, where the details must arrive for at least 99 % of
// callers, and still leaves two thirds of the time for the work, so a
// deadline of 20 ms runs an echo job (1 ms of work) in time. A quarter
// would give 37 ms at 150 ms, under the 50 ms that was short of 99 % under
// load in the fixed-margin runs; a half would leave a 20 ms caller 10 ms.
//
// # Callers' own deadlines, measured
//
// With two CPU hogs beside it (two `sh -c 'while :; do :; done'`) on an
// otherwise quiet machine — the load this project's tests must stand —
// three runs of go run ./cmd/deadline-probe -deadlines
// 20ms,50ms,100ms,150ms,1s -retry on -n 200 -c 20 (200 calls per row, load
// average 0.4–0.8 before the hogs; the third with other builds running,
// 3.4–3.8), calls that received the TimeoutExceeded details:
//
//	deadline   Go                  Python              Node
//	20 ms      153 / 197 / 185     167 / 176 /  93     191 / 199 / 158
//	50 ms      200 / 200 / 200     200 / 200 / 193     200 / 200 / 200
//	100 ms     200 / 200 / 200     200 / 200 / 192     200 / 200 / 200
//	150 ms     200 / 200 / 200     200 / 200 / 200     200 / 200 / 200
//	1000 ms    200 / 200 / 200     200 / 200 / 199     200 / 200 / 200
//
// From 150 ms on every row kept the details for 99.5 % of calls or more
// (the target is 99 %); at 50 and 100 ms at least 96 %; at 20 ms 46–99 %,
// where the margin (7 ms) is shorter than a scheduling delay. With
// -agent echo (1 ms of work) RunJob answered 10 of 10 at 20, 50 and 100 ms
// in all three languages. The measurements below were made while five
// other engineers' builds ran (load average 7–18): there a whole block of
// calls is lost now and then to a stall of the machine, and the target is
// not met in every run (see "The lost blocks").
//
// cmd/deadline-probe (go run ./cmd/deadline-probe -deadlines
// 20ms,50ms,100ms,150ms,1s -retry on -n 100) makes 100 RunJob calls per
// deadline and language, each to a job that outlives the deadline, 20 in
// flight, the published retry policy on, through each client against the
// gateway binary on loopback, and counts the calls that received the
// TimeoutExceeded details. The machine has 2 vCPUs shared with five other
// engineers' builds, so the load average was never below 4.
//
// Node lost the details first. Two causes, both measured:
//
//   - Node's event loop runs due timers before it reads the sockets (the
//     timers phase comes before the poll phase). After any stall longer than
//     the margin — a busy loop, or the process not scheduled — grpc-js's
//     deadline timer ran first and cancelled the call while the gateway's
//     answer, with the details, was already in the socket. The TypeScript
//     test "delivers the timeout details after the event loop stalled past
//     the deadline" stalls the loop from 50 to 700 ms of a 300 ms call:
//     with grpc-js keeping the deadline the caller gets a bare
//     DEADLINE_EXCEEDED every time.
//   - The request itself left late. grpc-js starts its timer when the call
//     is made; the HEADERS frame is written in that loop turn's check phase.
//     Timing the calls that ended bare (at load average 8, two hogs) showed
//     the request leaving 30–85 ms after the call was made, while the
//     gateway counts the deadline from the request's arrival: the caller's
//     timer ran that much ahead of the gateway's, more than the margin.
//
// The fix is where the caller feels it, in the TypeScript client
// (clients/typescript/src/deadline.ts): it keeps the deadline itself. It
// sends the same grpc-timeout grpc-js would, gives grpc-js no deadline,
// starts its timer in the check phase after the call was made (as the
// request leaves), and when the timer runs it waits one more check phase —
// one poll phase, which reads whatever has arrived — before it cancels the
// call. The trade-off is the caller's own time, not the gateway's margin: a
// call whose answer has not arrived ends up to one event-loop turn after
// timeoutMs, plus the time the process took to send the request. On an idle
// process both are well under a millisecond; a process stalled by 100 ms
// gives its calls up to that much more — the time the stall took from them
// before the request left. Calls whose answer arrives in time are not
// lengthened at all. Rejected: a larger margin (it takes working time from
// every caller, stalled or not, and does not help when the request leaves
// late by more than the margin); a margin following the connection's
// measured delay (the delay is inside the calling process: grpc-timeout is
// relative and says nothing of when the request was meant to leave, so the
// gateway cannot see it). grpcio and grpc-go read their sockets on threads
// of their own, not after their timers, and keep their deadlines as they
// are.
//
// Node before and after, interleaved runs with two `yes` hogs beside (load
// average 7.5–9.6), three runs each, share of calls with the details:
//
//	deadline   before (grpc-js's timer)   after (deadline.ts)
//	20 ms      31 / 13 / 17 %             100 / 100 / 10 %
//	50 ms      82 / 77 /  0 %             100 / 100 / 56 %
//	100 ms     79 / 75 / 12 %             100 / 100 / 52 %
//	150 ms     100 / 99 / 19 %            100 / 100 / 100 %
//	1000 ms    100 / 100 / 59 %           100 / 100 / 100 %
//
// All three languages, three runs without extra load (load average 7.9–8.9
// from the other builds) and three with two `yes` hogs beside (8.8–13.5),
// with deadline.ts as above but grpc-timeout set once per call (it is now
// set per attempt; see below):
//
//	           without hogs                                 two hogs
//	deadline   Go            Python        Node             Go            Python        Node
//	20 ms      33/100/19     95/91/61      100/65/85        17/64/52      67/43/42      98/97/67
//	50 ms      100/100/89    100/100/93    100/99/100       100/60/100    60/63/95      100/100/80
//	100 ms     100/100/100   100/100/100   100/100/100      100/80/80     100/99/100    97/100/100
//	150 ms     100/100/100   100/100/100   80/100/100       100/100/99    80/100/100    100/100/100
//	1000 ms    100/100/100   100/80/100    100/100/100      88/100/100    87/100/100    100/100/100
//
// From 150 ms on, 31 of 36 rows kept the details for 99 % of calls or more.
// Each of the other five (Node once, Python three times, Go once) lost one
// block of calls — 20, 20, 20, 12 and 13, about the 20 in flight at one
// moment — in one run, while the other runs of the same row lost none: one
// stall of the gateway or of the whole machine longer than the margin
// (50 ms at 150 ms, 100 ms from 300 ms on). When the
// gateway is not scheduled past both its margin and the deadline, grpc-go's
// own deadline timer (which resets the stream with CANCEL, and is quicker
// than the handler's answer) or the caller's timer comes first, and no
// client can get details that were never sent; only a larger margin would
// cover such stalls, at every caller's expense. Below 150 ms the margin is
// 7–33 ms, less than this machine's stalls, and Go and Python callers lose
// the details more often; their calls ran. With -agent echo (1 ms of work),
// RunJob echo answered in time 10/10 at 20, 50 and 100 ms in Go and Node,
// and in Python at 50 and 100 ms; at 20 ms 6/10 (load average 13.7).
//
// The same with the final code (grpc-timeout per attempt, through call
// credentials), half an hour later, when the other builds alone brought the
// load average to 7–14 and with the hogs to 14–17:
//
//	           without hogs                                 two hogs
//	deadline   Go            Python        Node             Go            Python        Node
//	20 ms      99/62/99      94/43/100     81/77/99         59/88/66      7/69/46       32/66/87
//	50 ms      100/100/63    80/80/69      81/100/99        99/100/60     82/98/98      100/99/88
//	100 ms     100/100/100   100/100/80    79/84/90         100/100/40    100/100/72    100/100/100
//	150 ms     100/100/100   100/100/100   59/100/100       100/100/62    100/100/36    100/100/100
//	1000 ms    100/100/100   100/100/100   100/100/100      100/100/100   100/90/100    100/77/100
//
// At that load each language lost whole blocks of calls (10 to 64) in some
// runs; 31 of 36 rows from 150 ms on kept 99 %. Interleaved runs of the two Node
// versions (two hogs, load average 12–15, six runs of 200 calls each) kept
// the details for 90 % (per call) and 85 % (per attempt) of calls at
// 150 ms and 90 % and 91 % at 100 ms, both losing whole blocks while
// Node's event loop was stalled for up to 0.7 s: no difference the
// machine's noise lets one see. The per-attempt header is kept because a
// retried attempt otherwise tells the gateway the whole budget again
// (the TypeScript test "sends each attempt the time left").
//
// # The lost blocks: stalls of the machine
//
// What loses a whole block of calls from 150 ms on was looked for with
// cmd/deadline-probe (-retry on -n 100, 20 in flight) against the gateway
// binary run with GODEBUG=gctrace=1, two `yes` hogs beside it, and a
// separate process that sleeps 1 ms in a loop and prints every gap over
// 30 ms (the machine's stalls, as any process sees them; the probe now
// counts them itself, per language: column "stalls >30 ms"). In one run at
// load average 2–4, Python lost 5, 10 and 3 calls at 150, 100 and 50 ms
// exactly while that process saw two gaps of 87 and 90 ms; the gateway's
// three garbage collections paused it for 1.3–1.7 ms (stop the world).
// In the two sets below (load average 9–16.5, the other engineers' builds
// with the hogs), the unrelated process saw 97 and 218 gaps over 30 ms, the
// longest 316 and 617 ms, while the gateway's longest GC pause was 16 ms.
// So it is not a GC pause, nor a lock of the gateway (a process that shares
// nothing with it stalls at the same moments) but the scheduler of a
// machine with more runnable threads than cores, which stops every process
// now and then for longer than the margin. No margin that leaves a 150 ms
// caller time to work can cover a 300–600 ms stall.
//
// What a server can do is follow the stalls: WithStallMargin
// (TIMEOUTPROFILE_STALL_MARGIN=true; off by default, see stall.go) makes
// the margin at least 1.5 × the longest lateness with which a call bounded
// by its caller's deadline ended in the last 10 s, at most half the time
// left. Old (the scaled margin alone) and new (with WithStallMargin), two
// gateways side by side, runs interleaved per language, two sets of three
// runs each (load average 9.3–15.1 and 8.8–16.5), share of calls with the
// details per run:
//
//	           Go                                                Python                                            Node
//	deadline   old                      new                      old                      new                      old                      new
//	20 ms    73/0/25/55/88/76         100/80/69/25/85/100      1/0/62/92/0/1            58/63/64/100/47/99       83/64/100/100/97/100     41/40/100/100/71/95
//	50 ms    81/10/39/100/80/91       87/53/100/100/74/100     58/94/93/100/84/75       85/88/72/100/100/100     100/100/100/100/80/73    100/100/96/92/80/100
//	100 ms   100/84/60/100/100/97     100/88/100/100/71/100    100/100/100/100/47/57    87/99/63/100/100/100     89/100/100/100/60/89     100/100/100/100/53/100
//	150 ms   100/100/100/100/43/80    100/99/74/100/100/100    100/85/100/100/52/100    100/100/100/100/100/87   100/100/90/100/100/96    100/86/100/100/96/100
//	1000 ms  100/80/100/100/100/100   100/100/100/100/100/100  100/96/100/100/96/87     100/100/100/100/100/100  100/100/100/100/100/67   100/100/100/89/100/100
//
// A third set of three, later (load average 8.0–17.9, fewer stalls: 26
// gaps over 30 ms, the longest 246 ms; the probe's own count per language
// at most 10, the longest 105 ms):
//
//	deadline   Go old     Go new     Python old   Python new   Node old    Node new
//	20 ms      66/87/64   24/94/79   70/95/17     84/69/46     99/100/80   100/100/89
//	50 ms      100 ×3     100 ×3     99/100/46    100/100/85   100 ×3      100 ×3
//	100 ms     100 ×3     100 ×3     100/100/92   82/100/100   100 ×3      100 ×3
//	150 ms     100 ×3     100 ×3     100 ×3       100/100/93   100 ×3      100 ×3
//	1000 ms    100 ×3     100 ×3     100 ×3       100 ×3       100 ×3      100 ×3
//
// From 150 ms on, in the first two sets 25 of 36 runs kept the details
// for 99 % of calls or more with the scaled margin alone (3,372 of 3,600
// calls) and 31 of 36 with the stall margin (3,531 of 3,600); in the
// third, with fewer and shorter stalls, 18 and 17 of 18 (1,800 and 1,793
// of 1,800). Over all nine runs per cell, 43 and 48 of 54. Below 150 ms
// the two do not differ beyond the noise. Neither reaches 99 % in every run on this
// machine, and the stall margin takes working time from callers (up to
// half of a call's time left, while stalls are seen), which is the promise
// a caller feels first: it stays off by default, for an operator whose
// machine stalls to turn on.
//
// The older measurement behind the 100 ms ceiling, TestMeasureDeadlineMargin
// (run it with TIMEOUTPROFILE_MEASURE=1 go test -run
// TestMeasureDeadlineMargin -v -count=1 -timeout 30m ./timeoutprofile/):
// 400 concurrent calls per row over loopback TCP, deadlines spread evenly
// over 50 ms–2 s, a handler that waits for its context, Go clients in a
// separate process, three rounds (1200 calls per row), fixed margins; a
// 2-core machine shared with other builds (load average 9.5–11). Calls
// that received the details out of 1200:
//
//	margin   no extra load   2 hog processes   2 hog goroutines in the server
//	0 ms        4 (0.3%)        4 (0.3%)           0 (0%)
//	5 ms      107 (8.9%)       98 (8.2%)          15 (1.2%)
//	10 ms    1056 (88.0%)     534 (44.5%)         28 (2.3%)
//	20 ms    1195 (99.6%)     774 (64.5%)        238 (19.8%)
//	30 ms    1195 (99.6%)    1193 (99.4%)        303 (25.2%)
//	50 ms    1196 (99.7%)    1146 (95.5%)        702 (58.5%)
//	100 ms   1200 (100%)     1182 (98.5%)       1038 (86.5%)
//	200 ms   1200 (100%)     1200 (100%)        1153 (96.1%)
//
// A server saturated by its own goroutines is different: it reads requests
// late, so its view of each caller's deadline is later by that delay
// (median 55 ms here) and no margin keeps up (200 ms: 96.1%); do not run a
// server at full CPU and expect details.
//
// # Retries
//
// Timeouts are retryable (SW4-002 §5.2). RetryServiceConfig builds a gRPC
// service config with a retryPolicy on DEADLINE_EXCEEDED and UNAVAILABLE,
// exponential backoff with gRPC's jitter, bounded attempts and a retry
// budget (retryThrottling). Its default policy is also the file
// timeoutprofile/retry_service_config.json, for clients in other
// languages: pass its text as the "grpc.service_config" channel option
// (grpcio, @grpc/grpc-js). A test keeps the file equal to
// RetryServiceConfig(RetryPolicy{}); go generate rewrites it. gRPC's
// built-in retries share the call's deadline.
//
// Every TimeoutExceeded answer — whichever budget was spent, the profile's,
// the caller's x-timeout-ms or the caller's own deadline — carries the
// trailer grpc-retry-pushback-ms: -1 (PushbackKey), which grpc-go, grpcio
// and grpc-js honour by not retrying, whatever the policy says: the retry
// would get the same budget and run the work again (or, inside the
// caller's deadline, end as a bare DEADLINE_EXCEEDED without details). The
// policy's DEADLINE_EXCEEDED therefore retries only deadlines that did not
// come from this package, e.g. a proxy's. A service whose handlers start
// work that must not run twice should also make every attempt of a call
// carry the same idempotency key (sessiongate's clients do). For a budget per attempt use go-grpc-middleware v2's retry
// interceptor outside this package's client interceptor:
//
//	grpc.WithChainUnaryInterceptor(
//		retry.UnaryClientInterceptor(
//			retry.WithCodes(codes.DeadlineExceeded, codes.Unavailable),
//			retry.WithBackoff(retry.BackoffExponentialWithJitter(100*time.Millisecond, 0.2)),
//			retry.WithMax(3)),
//		tp.UnaryClientInterceptor())
//
// Each attempt then passes through tp's interceptor and gets its own
// profile deadline, under the caller's overall deadline. The fast-fail
// pattern shortens the budget on retries, so a struggling dependency is
// abandoned quickly instead of being waited on as long again: give the
// first attempt the profile's budget and later ones less, e.g. with
// retry.WithPerRetryTimeout or a smaller CallTimeout when retrying by hand.
// Keep the overall deadline and the retry budget so retries stay bounded.
//
// # Concurrency and resources
//
// An Enforcer is immutable after New and safe for concurrent use; its only
// mutable state is the method cache (copy-on-write, inserts under a mutex)
// and the log rate limiter (a mutex). The package starts no goroutines of
// its own: budgets are enforced with timers (time.AfterFunc, pooled and
// reused; one per call, reset on each message of a stream), whose
// callbacks run on the runtime's timer goroutines; every timer is stopped
// and every handler context cancelled when its call returns. Contexts
// derived from a handler's context are cancelled through an AfterFunc hook
// the context package uses instead of a goroutine; in the rare race where a
// context is derived just as the call ends, the context package's contract
// requires its cancellation to run on a short-lived goroutine. There is
// nothing to close.
package timeoutprofile
