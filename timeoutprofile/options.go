package timeoutprofile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"google.golang.org/protobuf/reflect/protoregistry"
)

// An Option configures an Enforcer. Options that change the profile table
// (WithProfile, WithMethodProfile, WithStreamingPolicy, WithFallback,
// WithCallerProfile) form the client level of SW4-002 §2.3: they override
// the global layer given by WithConfig.
type Option interface {
	apply(*options)
}

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

type mapping struct{ pattern, profile string }

type policyOption struct {
	pattern string
	policy  StreamingPolicy
}

type callerOption struct {
	caller  string
	profile Profile
}

type options struct {
	config        *Config
	profiles      []Profile
	methods       []mapping
	streaming     []policyOption
	fallbacks     []string
	callerFn      func(context.Context) string
	callers       []callerOption
	logger        *slog.Logger
	logInterval   time.Duration
	observer      Observer
	files         *protoregistry.Files
	margin        time.Duration
	hasMargin     bool
	noMargin      []string
	stall         bool
	hasStall      bool
	subKeyFn      SubKeyFunc
	subKeyMethods []string
	errs          []error
}

func defaultOptions() options {
	return options{
		logger:      slog.New(slog.DiscardHandler),
		logInterval: 10 * time.Second,
		observer:    nopObserver{},
		files:       protoregistry.GlobalFiles,
	}
}

// WithConfig sets the global layer, usually from LoadGlobal(os.Getenv).
// Without it the Enforcer starts from the standard profiles alone.
func WithConfig(c *Config) Option {
	return optionFunc(func(o *options) {
		if c == nil {
			o.errs = append(o.errs, errors.New("WithConfig: nil Config"))
		}
		o.config = c
	})
}

// WithProfile defines a profile, or replaces one of the same name, with the
// complete values given. Defining the same name twice is an error.
func WithProfile(p Profile) Option {
	return optionFunc(func(o *options) { o.profiles = append(o.profiles, p) })
}

// WithMethodProfile maps a method ("/package.Service/Method") or every
// method of a service ("/package.Service/*") to a profile. Such mappings
// come first in profile selection; a method's own mapping beats its
// service's. They override the configuration's mapping of the same key.
func WithMethodProfile(pattern, profile string) Option {
	return optionFunc(func(o *options) { o.methods = append(o.methods, mapping{pattern, profile}) })
}

// WithStreamingPolicy sets the streaming limits of a method or service
// (same keys as WithMethodProfile), overriding the configuration and the
// method's (timeoutprofile.v1.streaming) option.
func WithStreamingPolicy(pattern string, p StreamingPolicy) Option {
	return optionFunc(func(o *options) { o.streaming = append(o.streaming, policyOption{pattern, p}) })
}

// WithFallback names the profile of methods that nothing else selects
// (default: FallbackProfile, or the configuration's "fallback").
func WithFallback(profile string) Option {
	return optionFunc(func(o *options) { o.fallbacks = append(o.fallbacks, profile) })
}

// WithCallerIdentity sets how the server interceptors tell callers apart,
// for per-caller overrides: fn returns the caller's identity from the
// call's context (for example what an authentication interceptor stored).
// fn runs on every call of a method that has per-caller overrides, so it
// should be cheap. Client interceptors ignore it.
func WithCallerIdentity(fn func(context.Context) string) Option {
	return optionFunc(func(o *options) {
		if fn == nil {
			o.errs = append(o.errs, errors.New("WithCallerIdentity: nil function"))
		}
		o.callerFn = fn
	})
}

// WithCallerProfile replaces, for calls from caller only, the profile named
// p.Name with p: a batch caller can get longer tool_call budgets than an
// interactive one. It overrides the configuration's "callers" entry for the
// same caller and profile. It needs WithCallerIdentity on the server.
func WithCallerProfile(caller string, p Profile) Option {
	return optionFunc(func(o *options) { o.callers = append(o.callers, callerOption{caller, p}) })
}

// WithLogger sets where warnings go: clamped overrides, kept caller
// deadlines, timeouts, unknown profiles in method options (default:
// discard).
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(o *options) {
		if l == nil {
			o.errs = append(o.errs, errors.New("WithLogger: nil logger"))
		}
		o.logger = l
	})
}

// WithLogInterval sets how often at most the same warning (same method,
// same rule) is logged; the warnings held back in between are counted in
// the next one's "suppressed" attribute (default 10 s).
func WithLogInterval(d time.Duration) Option {
	return optionFunc(func(o *options) {
		if d <= 0 {
			o.errs = append(o.errs, errors.New("WithLogInterval: must be positive"))
		}
		o.logInterval = d
	})
}

// WithObserver sets the receiver of metric events, such as tpprom's.
func WithObserver(obs Observer) Option {
	return optionFunc(func(o *options) {
		if obs == nil {
			o.errs = append(o.errs, errors.New("WithObserver: nil Observer"))
		}
		o.observer = obs
	})
}

// WithFiles sets where method options are looked up (default
// protoregistry.GlobalFiles, where generated code registers itself).
func WithFiles(files *protoregistry.Files) Option {
	return optionFunc(func(o *options) {
		if files == nil {
			o.errs = append(o.errs, errors.New("WithFiles: nil registry"))
		}
		o.files = files
	})
}

// WithDeadlineMargin sets how long before the caller's own deadline the
// server interceptors end a call whose effective budget is that deadline
// (default DefaultDeadlineMargin; the configuration's deadline_margin_ms or
// TIMEOUTPROFILE_DEADLINE_MARGIN_MS if set). The call then ends with
// DEADLINE_EXCEEDED and the timeout details, limit "caller_deadline",
// before the caller's timer fires; its budget is shortened by d. 0 turns
// this off: the caller's deadline governs and its own transport usually
// reports the timeout, without details. d must be between 0 and
// MaxDeadlineMargin. It overrides the configuration.
func WithDeadlineMargin(d time.Duration) Option {
	return optionFunc(func(o *options) {
		if err := checkMargin(d); err != nil {
			o.errs = append(o.errs, fmt.Errorf("WithDeadlineMargin: %w", err))
		}
		o.margin, o.hasMargin = d, true
	})
}

// WithStallMargin turns the stall-following margin on or off (default off;
// TIMEOUTPROFILE_STALL_MARGIN=true in the environment of LoadGlobal): a
// call whose caller's deadline is its budget gets a margin of at least 1.5
// times the longest lateness with which such a call ended in the last 10
// seconds, at most half of its time left (see stall.go and "The deadline
// margin" in the package documentation). It overrides the environment.
func WithStallMargin(on bool) Option {
	return optionFunc(func(o *options) { o.stall, o.hasStall = on, true })
}

// WithoutDeadlineMargin names methods ("/package.Service/Method") whose
// handlers answer at once from memory — health checks, status probes — so
// that no deadline margin applies to them: they run under the caller's
// deadline as it is, however short, and answer whenever the handler returns
// before it. Their profile still bounds them, and a call whose deadline
// passed before its handler returned still ends with DEADLINE_EXCEEDED.
// Use it only for handlers that never wait.
func WithoutDeadlineMargin(fullMethods ...string) Option {
	return optionFunc(func(o *options) {
		for _, m := range fullMethods {
			if _, _, ok := splitFullMethod(m); !ok {
				o.errs = append(o.errs, fmt.Errorf("WithoutDeadlineMargin(%q): want \"/package.Service/Method\"", m))
			}
		}
		o.noMargin = append(o.noMargin, fullMethods...)
	})
}

// checkMargin validates a deadline margin.
func checkMargin(d time.Duration) error {
	if d < 0 || d > MaxDeadlineMargin {
		return fmt.Errorf("want 0 to %d ms (got %v)", MaxDeadlineMargin.Milliseconds(), d)
	}
	return nil
}
