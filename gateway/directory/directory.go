package directory

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// Config is the data a Directory is made of. Zero fields take the defaults
// below; Open validates the result once.
type Config struct {
	Instance  string   // this replica's instance id (required); its lease key is <Prefix>replica:<Instance>
	Advertise string   // host:port peers use to reach this replica, published in the lease
	Keys      []string // token encryption keys, "id:base64key" (32 bytes); the first encrypts, all decrypt (required)

	Prefix     string        // key prefix, default "sessiongate:"
	LeaseTTL   time.Duration // replica lease lifetime, default 5s; Run refreshes it every LeaseTTL/3
	SessionTTL time.Duration // record lifetime, refreshed by every write, default 600s (the ARCP resume window)

	// OrphanScanEvery is the longest Orphans goes without scanning the
	// keyspace when nothing says there is anything to adopt (default 30s):
	// a safety net for records of replicas that never entered the
	// registry (an older version during an upgrade).
	OrphanScanEvery time.Duration

	OpTimeout   time.Duration // bound on one operation (all its round trips and retries), default 2s
	DialTimeout time.Duration // bound on one connection attempt, default 1s
	PoolSize    int           // connections, default go-redis's (10 per CPU)
	TLSConfig   *tls.Config   // for rediss:// URLs: replaces the default (system roots, server name from the URL)

	Counters *Counters    // shared for metrics; nil = private (see Directory.Counters)
	Observer Observer     // optional: latency and outcome of every operation
	Logger   *slog.Logger // lease trouble; default discards
}

// Defaults.
const (
	DefaultPrefix      = "sessiongate:"
	DefaultLeaseTTL    = 5 * time.Second
	DefaultSessionTTL  = 600 * time.Second
	DefaultOrphanScan  = 30 * time.Second
	DefaultOpTimeout   = 2 * time.Second
	DefaultDialTimeout = time.Second

	// MinLeaseTTL keeps the refresh period (TTL/3) above Redis's
	// millisecond expiry resolution and scheduling noise.
	MinLeaseTTL = 30 * time.Millisecond

	// scanCount is the COUNT hint of each SCAN in Orphans.
	scanCount = 512
)

func (c Config) withDefaults() Config {
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = DefaultLeaseTTL
	}
	if c.SessionTTL == 0 {
		c.SessionTTL = DefaultSessionTTL
	}
	if c.OrphanScanEvery == 0 {
		c.OrphanScanEvery = DefaultOrphanScan
	}
	if c.OpTimeout == 0 {
		c.OpTimeout = DefaultOpTimeout
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = DefaultDialTimeout
	}
	if c.Counters == nil {
		c.Counters = &Counters{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	c.Keys = append([]string(nil), c.Keys...)
	return c
}

func (c Config) validate() error {
	switch {
	case c.Instance == "":
		return errors.New("directory: config: Instance is required")
	case c.LeaseTTL < MinLeaseTTL:
		return fmt.Errorf("directory: config: LeaseTTL %v below %v", c.LeaseTTL, MinLeaseTTL)
	case c.SessionTTL < time.Millisecond:
		return fmt.Errorf("directory: config: SessionTTL %v below 1ms", c.SessionTTL)
	case c.OpTimeout < 0 || c.DialTimeout < 0 || c.OrphanScanEvery < 0:
		return errors.New("directory: config: negative timeout")
	}
	return nil
}

// Directory is a replica's handle on the cluster directory in Redis.
//
// All methods may be called concurrently. Run is the only long-running call
// and must run at most once at a time; Close is idempotent.
type Directory struct {
	// Immutable after Open.
	cfg         Config
	rdb         *redis.Client
	where       string // redacted URL, for errors
	keys        *KeyRing
	incarnation string // random per Directory: tells this process's lease from another with the same instance id
	sessPrefix  string // <prefix>session:
	leasePrefix string // <prefix>replica:
	leaseKey    string
	registryKey string // <prefix>replicas: instances that held a lease
	releasesKey string // <prefix>releases: counts Releases
	markerKey   string // <prefix>incarnation: the directory's incarnation marker
	ownedPrefix string // <prefix>owned:<instance>: the owner index, a set of session ids per replica
	releasedKey string // <prefix>released: the set of released session ids
	scanPattern string
	started     time.Time
	counters    *Counters

	sweep sweepState

	marker     atomic.Pointer[string] // the incarnation marker last read (Marker)
	running    atomic.Bool
	leaseUntil atomic.Int64 // unix nanos: local estimate of when our lease expires (0 = never held)
	closeOnce  sync.Once
	closeErr   error
}

// Open connects to the directory at rawURL: redis://[user:password@]host:port[/db],
// rediss://… (TLS) or unix://[user:password@]/path/to/socket[?db=N], checks it
// answers PING within cfg.OpTimeout, and returns a Directory. It starts no
// goroutines of its own (the client's connection pool may hold idle
// connections until Close). Errors for an unreachable Redis are
// *UnavailableError.
func Open(ctx context.Context, rawURL string, cfg Config) (*Directory, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	keys, err := ParseKeyRing(cfg.Keys...)
	if err != nil {
		return nil, err
	}
	where := redact(rawURL)
	opt, err := redis.ParseURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("directory: redis URL %s: %w", where, err)
	}
	if cfg.TLSConfig != nil && opt.TLSConfig != nil {
		opt.TLSConfig = cfg.TLSConfig.Clone()
	}
	opt.DialTimeout = cfg.DialTimeout
	opt.ReadTimeout = cfg.OpTimeout
	opt.WriteTimeout = cfg.OpTimeout
	opt.PoolTimeout = cfg.OpTimeout
	opt.ContextTimeoutEnabled = true // our per-operation deadline bounds every call
	opt.MaxRetries = 1
	opt.DialerRetries = 1
	opt.DisableIdentity = true
	opt.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	if cfg.PoolSize > 0 {
		opt.PoolSize = cfg.PoolSize
	}

	var inc [8]byte
	_, _ = rand.Read(inc[:])
	d := &Directory{
		cfg:         cfg,
		rdb:         redis.NewClient(opt),
		where:       where,
		keys:        keys,
		incarnation: hex.EncodeToString(inc[:]),
		sessPrefix:  cfg.Prefix + "session:",
		leasePrefix: cfg.Prefix + "replica:",
		leaseKey:    cfg.Prefix + "replica:" + cfg.Instance,
		registryKey: cfg.Prefix + "replicas",
		releasesKey: cfg.Prefix + "releases",
		markerKey:   cfg.Prefix + "incarnation",
		ownedPrefix: cfg.Prefix + "owned:",
		releasedKey: cfg.Prefix + "released",
		scanPattern: globEscape(cfg.Prefix+"session:") + "*",
		started:     time.Now(),
		counters:    cfg.Counters,
	}
	if err := d.do(ctx, "ping", func(ctx context.Context) error { return d.rdb.Ping(ctx).Err() }); err != nil {
		_ = d.rdb.Close()
		return nil, err
	}
	// The marker as of now: a later one means Redis lost its data since.
	if _, err := d.Marker(ctx); err != nil {
		_ = d.rdb.Close()
		return nil, err
	}
	return d, nil
}

// Close closes the connections. It does not drop the lease (Run does that
// when its context ends). Idempotent.
func (d *Directory) Close() error {
	d.closeOnce.Do(func() { d.closeErr = d.rdb.Close() })
	return d.closeErr
}

// Instance is this replica's instance id.
func (d *Directory) Instance() string { return d.cfg.Instance }

// Counters are this directory's counters (Config.Counters if given).
func (d *Directory) Counters() *Counters { return d.counters }

// SessionTTL returns the lifetime of a session record, which every write
// renews.
func (d *Directory) SessionTTL() time.Duration { return d.cfg.SessionTTL }

// Session is what a replica stores about a session when it claims it.
type Session struct {
	ID                string // the gateway's session id (the record key)
	Caller            string // caller identity allowed to use the session
	Runtime           string // runtime name
	UpstreamSessionID string // the ARCP session id at the runtime
	ResumeToken       string // latest resume token (stored encrypted)
	AckedSeq          uint64 // last event_seq acked upstream
}

// Record is a session record as read from the directory.
type Record struct {
	Session
	Owner     string // instance id; "" = released for handoff
	Epoch     uint64
	UpdatedAt time.Time // server clock of the last write

	// Get only.
	OwnerAddr string        // owner's advertised address, "" when its lease is gone or the record is released
	OwnerLive bool          // the owner's lease exists
	ExpiresIn time.Duration // remaining record TTL
	// OwnerLeaseLeft is the remaining TTL of the owner's lease (0 when
	// it is gone): how long a silent owner still holds the session.
	OwnerLeaseLeft time.Duration

	// Takeover only.
	PreviousOwner string // owner before the takeover ("" = it had been released)
	// Marker is the incarnation marker the takeover script checked: the
	// record was claimed while the directory held that marker.
	Marker string
}

// Change is what Update writes. Zero fields leave the record's value; an
// Update with a zero Change only refreshes the record's TTL.
type Change struct {
	ResumeToken string // new token after a welcome; "" keeps the stored one
	AckedSeq    uint64 // ignored unless above the stored seq (it never goes backwards)
}

// Claim creates the record of a new session with this replica as owner at
// epoch 1. It fails with ErrExists if a record is there.
func (d *Directory) Claim(ctx context.Context, s Session) (epoch uint64, err error) {
	var v verdict
	err = d.do(ctx, "claim", func(ctx context.Context) error {
		res, err := claimScript.Run(ctx, d.rdb, []string{d.sessKey(s.ID)},
			d.cfg.Instance, s.Caller, s.Runtime, s.UpstreamSessionID, d.sealToken(s.ID, s.ResumeToken),
			strconv.FormatUint(s.AckedSeq, 10), d.cfg.SessionTTL.Milliseconds(), d.ownedPrefix, s.ID).StringSlice()
		v = verdictOf(res)
		return err
	})
	if err != nil {
		return 0, err
	}
	d.counters.Claims.Add(1)
	switch v {
	case vOK:
		return 1, nil
	case vExists:
		return 0, ErrExists
	}
	return 0, d.unexpected("claim", v)
}

// Update writes a new resume token and/or acked seq, if this replica still
// owns the session at epoch; otherwise it returns a *FencedError (or
// ErrNotFound). It refreshes the record's TTL. The owner should write the
// token after every welcome and the acked seq before acking it upstream
// (see the package documentation), and call Update (a zero Change will do)
// at least once per SessionTTL so an idle session's record does not expire.
// Token writes for one session must not be issued concurrently.
func (d *Directory) Update(ctx context.Context, sessionID string, epoch uint64, c Change) error {
	var res []string
	err := d.do(ctx, "update", func(ctx context.Context) (err error) {
		res, err = updateScript.Run(ctx, d.rdb, []string{d.sessKey(sessionID)},
			d.cfg.Instance, strconv.FormatUint(epoch, 10), d.sealToken(sessionID, c.ResumeToken),
			strconv.FormatUint(c.AckedSeq, 10), d.cfg.SessionTTL.Milliseconds()).StringSlice()
		return err
	})
	if err != nil {
		return err
	}
	d.counters.Updates.Add(1)
	return d.fencedOr(sessionID, "update", res)
}

// Takeover makes this replica the owner at the next epoch, if the record is
// released (owner ""), owned by this replica, or owned by a replica whose
// lease is gone. It returns the record with the decrypted resume token, to be
// presented upstream. If the owner's lease is live it returns an *OwnedError
// naming the owner's address (forward the call there); ErrNotFound if there is
// no record. If the token cannot be decrypted (a *KeyError) the takeover has
// happened all the same: the caller owns a session it cannot resume and
// should Delete it.
func (d *Directory) Takeover(ctx context.Context, sessionID string) (Record, error) {
	var res []any
	marker := d.LastMarker()
	err := d.do(ctx, "takeover", func(ctx context.Context) (err error) {
		res, err = takeoverScript.Run(ctx, d.rdb, []string{d.sessKey(sessionID)},
			d.cfg.Instance, d.leasePrefix, d.cfg.SessionTTL.Milliseconds(), d.markerKey, marker,
			d.ownedPrefix, d.releasedKey, sessionID).Slice()
		return err
	})
	if err != nil {
		return Record{}, err
	}
	d.counters.Takeovers.Add(1)
	s := anyStrings(res)
	if verdictOf(s) == "FLUSHED" {
		return Record{}, ErrFlushed
	}
	r, err := d.takeoverReply(sessionID, s)
	r.Marker = marker
	return r, err
}

// TakeoverResult is one session's answer in a TakeoverMany batch: the
// record (as Takeover returns it) or Err, as Takeover would have returned
// it (ErrNotFound, an *OwnedError, a *KeyError with the record).
type TakeoverResult struct {
	Record Record
	Err    error
}

// TakeoverMany is Takeover of every session in ids, in one script call
// (one round trip, one marker check). It fails as a whole only when Redis
// cannot be asked or with ErrFlushed; otherwise each session has its own
// result, in the order of ids. Batches of a few hundred keep Redis's
// other clients waiting no more than a millisecond or two.
func (d *Directory) TakeoverMany(ctx context.Context, ids []string) ([]TakeoverResult, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	keys := make([]string, len(ids))
	args := make([]any, 0, 7+len(ids))
	marker := d.LastMarker()
	args = append(args, d.cfg.Instance, d.leasePrefix, d.cfg.SessionTTL.Milliseconds(), d.markerKey, marker,
		d.ownedPrefix, d.releasedKey)
	for i, id := range ids {
		keys[i] = d.sessKey(id)
		args = append(args, id)
	}
	var res []any
	err := d.do(ctx, "takeover_many", func(ctx context.Context) (err error) {
		res, err = takeoverManyScript.Run(ctx, d.rdb, keys, args...).Slice()
		return err
	})
	if err != nil {
		return nil, err
	}
	d.counters.Takeovers.Add(uint64(len(ids)))
	if len(res) > 0 && res[0] == "FLUSHED" {
		return nil, ErrFlushed
	}
	if len(res) != len(ids)+1 || res[0] != string(vOK) {
		return nil, d.unexpected("takeover_many", verdict(fmt.Sprint(res[0])))
	}
	out := make([]TakeoverResult, len(ids))
	for i, id := range ids {
		one, _ := res[i+1].([]any)
		out[i].Record, out[i].Err = d.takeoverReply(id, anyStrings(one))
		out[i].Record.Marker = marker
	}
	return out, nil
}

// takeoverReply reads one session's takeover answer.
func (d *Directory) takeoverReply(sessionID string, s []string) (Record, error) {
	switch verdictOf(s) {
	case vNotFound:
		return Record{}, ErrNotFound
	case vOwned:
		d.counters.Owned.Add(1)
		return Record{}, &OwnedError{SessionID: sessionID, Owner: at(s, 1), Addr: at(s, 2)}
	case vOK:
	default:
		return Record{}, d.unexpected("takeover", verdictOf(s))
	}
	r := recordFrom(sessionID, s[2:])
	r.PreviousOwner = s[1]
	switch r.PreviousOwner {
	case "":
		d.counters.Handoffs.Add(1)
	case d.cfg.Instance:
	default:
		d.counters.Adopted.Add(1)
	}
	tok, err := d.keys.open(sessionID, at(s, 7))
	r.ResumeToken = tok
	return r, err
}

// Release gives the session up for handoff: the owner becomes "" and the data
// stays, so any replica may take it over at once, without waiting for this
// replica's lease to expire. After Release this replica is fenced.
func (d *Directory) Release(ctx context.Context, sessionID string, epoch uint64) error {
	var res []string
	err := d.do(ctx, "release", func(ctx context.Context) (err error) {
		res, err = releaseScript.Run(ctx, d.rdb, []string{d.sessKey(sessionID)},
			d.cfg.Instance, strconv.FormatUint(epoch, 10), d.cfg.SessionTTL.Milliseconds(), d.releasesKey,
			d.ownedPrefix, d.releasedKey, sessionID).StringSlice()
		return err
	})
	if err != nil {
		return err
	}
	d.counters.Releases.Add(1)
	return d.fencedOr(sessionID, "release", res)
}

// Delete removes the record when the session is really closed, if this
// replica owns it at epoch.
func (d *Directory) Delete(ctx context.Context, sessionID string, epoch uint64) error {
	var res []string
	err := d.do(ctx, "delete", func(ctx context.Context) (err error) {
		res, err = deleteScript.Run(ctx, d.rdb, []string{d.sessKey(sessionID)},
			d.cfg.Instance, strconv.FormatUint(epoch, 10), d.ownedPrefix, sessionID).StringSlice()
		return err
	})
	if err != nil {
		return err
	}
	d.counters.Deletes.Add(1)
	return d.fencedOr(sessionID, "delete", res)
}

// Get reads a record for a status probe: one read-only script (EVALSHA_RO),
// which changes nothing, not even the TTL. The resume token is not returned.
// It reports whether the owner's lease is live and its address.
func (d *Directory) Get(ctx context.Context, sessionID string) (Record, error) {
	var res []any
	err := d.do(ctx, "get", func(ctx context.Context) (err error) {
		res, err = getScript.RunRO(ctx, d.rdb, []string{d.sessKey(sessionID)}, d.leasePrefix, d.markerKey).Slice()
		return err
	})
	if err != nil {
		return Record{}, err
	}
	d.counters.Gets.Add(1)
	s := anyStrings(res)
	switch verdictOf(s) {
	case vNotFound:
		if age, err := strconv.ParseInt(at(s, 1), 10, 64); err == nil && age < d.recoverWindow().Milliseconds() {
			// No marker (-1), or a young one: the directory lost its
			// data and owners are restoring their records.
			return Record{}, ErrRecovering
		}
		return Record{}, ErrNotFound
	case vOK:
	default:
		return Record{}, d.unexpected("get", verdictOf(s))
	}
	r := recordFrom(sessionID, s[1:])
	r.OwnerAddr = at(s, 9)
	r.OwnerLive = at(s, 10) == "1"
	if ms, err := strconv.ParseInt(at(s, 11), 10, 64); err == nil && ms > 0 {
		r.ExpiresIn = time.Duration(ms) * time.Millisecond
	}
	if ms, err := strconv.ParseInt(at(s, 12), 10, 64); err == nil && ms >= 0 && r.OwnerLive {
		// 0: under a millisecond left (the key is not gone yet).
		r.OwnerLeaseLeft = time.Duration(max(ms, 1)) * time.Millisecond
	}
	return r, nil
}

// Replica is what a replica's lease says.
type Replica struct {
	Instance  string
	Addr      string // advertised host:port
	StartedAt time.Time
	ExpiresIn time.Duration // remaining lease TTL
}

// Owner looks up a replica's lease (read-only): its advertised address, for
// forwarding. ErrNoLease if the lease is gone.
func (d *Directory) Owner(ctx context.Context, instance string) (Replica, error) {
	var res []any
	err := d.do(ctx, "owner", func(ctx context.Context) (err error) {
		res, err = ownerScript.RunRO(ctx, d.rdb, []string{d.leasePrefix + instance}).Slice()
		return err
	})
	if err != nil {
		return Replica{}, err
	}
	d.counters.OwnerLookups.Add(1)
	s := anyStrings(res)
	if len(s) < 3 {
		return Replica{}, ErrNoLease
	}
	rp := Replica{Instance: instance, Addr: s[0]}
	if ms, err := strconv.ParseInt(s[1], 10, 64); err == nil {
		rp.StartedAt = time.UnixMilli(ms)
	}
	if ms, err := strconv.ParseInt(s[2], 10, 64); err == nil && ms > 0 {
		rp.ExpiresIn = time.Duration(ms) * time.Millisecond
	}
	return rp, nil
}

// Orphan is a session whose owner is gone or that was released.
type Orphan struct {
	SessionID string
	Owner     string // the owner whose lease is gone; "" = released
	Epoch     uint64
}

// Orphans returns up to limit sessions that may be taken over: released, or
// owned by a replica whose lease is gone (limit ≤ 0 means no limit). It never
// relies on keyspace notifications.
//
// Finding them means walking the keyspace with SCAN (MATCH
// <prefix>session:*, COUNT 512) and checking each batch in one read-only
// script: O(keys in the database / 512) round trips and O(keys) work in
// Redis, however few orphans there are. So Orphans first asks one read-only
// script, O(replicas), whether there can be any, and walks the keyspace
// only when
//   - a Release happened since the last complete walk (the releases
//     counter moved),
//   - a replica in the registry (every replica enters it with each lease
//     refresh) has no lease,
//   - the last walk found orphans, or stopped at limit (they may still be
//     there: a takeover can fail),
//   - or OrphanScanEvery has passed since the last complete walk.
//
// A replica whose lease is gone leaves the registry after a complete walk
// finds no record it owns. A walk stops early once it has limit orphans.
// Each round trip has its own OpTimeout. A session may be reported that
// another replica adopts a moment later: Takeover decides.
func (d *Directory) Orphans(ctx context.Context, limit int) ([]Orphan, error) {
	now := time.Now()
	var check []string
	err := d.do(ctx, "orphans", func(ctx context.Context) (err error) {
		check, err = sweepCheckScript.RunRO(ctx, d.rdb, nil, d.registryKey, d.leasePrefix, d.releasesKey).StringSlice()
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(check) == 0 {
		return nil, fmt.Errorf("directory: %s: empty reply to the sweep check", d.where)
	}
	releases, gone := check[0], check[1:]
	if !d.sweep.due(releases, len(gone) > 0, now, d.cfg.OrphanScanEvery) {
		d.counters.OrphanChecks.Add(1)
		return nil, nil
	}
	out, complete, err := d.walkOrphans(ctx, limit)
	if err != nil {
		return out, err
	}
	d.sweep.walked(releases, now, complete, len(out) > 0)
	if complete {
		d.counters.OrphanScans.Add(1)
		owners := make(map[string]bool, len(out))
		for _, o := range out {
			owners[o.Owner] = true
		}
		for _, inst := range gone {
			if owners[inst] {
				continue
			}
			// Nothing of inst's is left to adopt.
			err := d.do(ctx, "orphans", func(ctx context.Context) error {
				return registryDropScript.Run(ctx, d.rdb, nil, d.registryKey, d.leasePrefix, inst).Err()
			})
			if err != nil {
				return out, err
			}
		}
	}
	return out, nil
}

// sweepState is what Orphans remembers of its last walk of the keyspace.
type sweepState struct {
	mu       sync.Mutex
	walkedAt time.Time // the last complete walk's start (zero: none yet)
	releases string    // the releases counter read before it
	again    bool      // the last walk found orphans or stopped at limit
}

// due says whether Orphans must walk the keyspace (see Orphans).
func (s *sweepState) due(releases string, gone bool, now time.Time, every time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.again || gone || releases != s.releases || s.walkedAt.IsZero() || now.Sub(s.walkedAt) >= every
}

// walked records a walk that started at now after reading releases.
func (s *sweepState) walked(releases string, now time.Time, complete, found bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.again = !complete || found
	if complete {
		s.walkedAt, s.releases = now, releases
	}
}

// walkOrphans walks the keyspace for orphans, stopping at limit (≤ 0: none);
// complete says it saw every key.
func (d *Directory) walkOrphans(ctx context.Context, limit int) (out []Orphan, complete bool, _ error) {
	seen := make(map[string]bool)
	var cursor uint64
	for {
		var keys []string
		var res []string
		err := d.do(ctx, "orphans", func(ctx context.Context) (err error) {
			keys, cursor, err = d.rdb.Scan(ctx, cursor, d.scanPattern, scanCount).Result()
			if err != nil || len(keys) == 0 {
				return err
			}
			res, err = orphansScript.RunRO(ctx, d.rdb, keys, d.leasePrefix).StringSlice()
			return err
		})
		if err != nil {
			return out, false, err
		}
		for i := 0; i+2 < len(res); i += 3 {
			id := strings.TrimPrefix(res[i], d.sessPrefix)
			if seen[id] {
				continue // SCAN may return a key twice
			}
			seen[id] = true
			e, _ := strconv.ParseUint(res[i+2], 10, 64)
			out = append(out, Orphan{SessionID: id, Owner: res[i+1], Epoch: e})
			if limit > 0 && len(out) >= limit {
				return out, cursor == 0 && i+3 >= len(res), nil
			}
		}
		if cursor == 0 {
			return out, true, nil
		}
	}
}

// Run holds this replica's lease until ctx ends: it writes
// <prefix>replica:<instance> = {addr, started_ms, incarnation} with LeaseTTL
// at once and every LeaseTTL/3, each attempt bounded by the smaller of
// OpTimeout and LeaseTTL/3. Failures are counted (LeaseFailures), logged and
// retried at the next tick; they do not end Run. A lease held by another
// process with the same instance id is left alone (LeaseConflicts) until it
// expires. When ctx ends, Run deletes the lease (if still ours), so that
// other replicas may take over this replica's remaining sessions at once,
// and returns nil. Cancel it only when this replica stops owning sessions
// (after releasing them on a graceful shutdown). Run starts no goroutines.
func (d *Directory) Run(ctx context.Context) error {
	if !d.running.CompareAndSwap(false, true) {
		return errors.New("directory: Run is already running")
	}
	defer d.running.Store(false)
	period := d.cfg.LeaseTTL / 3
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			d.dropLease(context.WithoutCancel(ctx))
			return nil
		case <-timer.C:
		}
		d.refreshLease(ctx, period)
		timer.Reset(period)
	}
}

// LeaseValidUntil is this process's estimate of when its lease expires: the
// start of the last successful refresh plus LeaseTTL (zero if never held).
// Past it, other replicas may be taking this replica's sessions over.
func (d *Directory) LeaseValidUntil() time.Time {
	if n := d.leaseUntil.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

func (d *Directory) refreshLease(ctx context.Context, budget time.Duration) {
	ctx, cancel := context.WithTimeoutCause(ctx, min(budget, d.cfg.OpTimeout), errOpTimeout)
	defer cancel()
	start := time.Now()
	var res []string
	err := d.do(ctx, "lease", func(ctx context.Context) (err error) {
		res, err = leaseScript.Run(ctx, d.rdb, []string{d.leaseKey}, d.incarnation, d.cfg.Advertise,
			d.started.UnixMilli(), d.cfg.LeaseTTL.Milliseconds(), d.registryKey, d.cfg.Instance).StringSlice()
		return err
	})
	switch {
	case err != nil:
		d.counters.LeaseFailures.Add(1)
		d.cfg.Logger.Warn("directory: lease refresh failed", "err", err,
			"valid_until", d.LeaseValidUntil())
	case verdictOf(res) == "CONFLICT":
		d.counters.LeaseConflicts.Add(1)
		d.cfg.Logger.Warn("directory: lease held by another process with the same instance id; waiting for it to expire",
			"instance", d.cfg.Instance, "key", d.leaseKey)
	default:
		d.counters.LeaseRefreshes.Add(1)
		d.leaseUntil.Store(start.Add(d.cfg.LeaseTTL).UnixNano())
	}
}

func (d *Directory) dropLease(ctx context.Context) {
	err := d.do(ctx, "lease", func(ctx context.Context) error {
		return leaseDropScript.Run(ctx, d.rdb, []string{d.leaseKey}, d.incarnation).Err()
	})
	if err != nil {
		d.cfg.Logger.Warn("directory: dropping the lease failed (it expires by itself)", "err", err)
	}
	d.leaseUntil.Store(0)
}

// do runs one operation under OpTimeout, observes it, and wraps transport
// failures as *UnavailableError. If the caller's own context ended, its
// cause is returned (wrapped) instead: that is not the directory's fault.
func (d *Directory) do(ctx context.Context, op string, f func(context.Context) error) error {
	start := time.Now()
	octx, cancel := context.WithTimeoutCause(ctx, d.cfg.OpTimeout, errOpTimeout)
	err := f(octx)
	cause := context.Cause(octx)
	cancel()
	took := time.Since(start)
	d.counters.Ops.Add(1)
	d.counters.LatencyNanos.Add(uint64(took))
	if err != nil {
		d.counters.Errors.Add(1)
		switch {
		case ctx.Err() != nil:
			err = fmt.Errorf("directory: %s: %w", op, context.Cause(ctx))
		case cause != nil && errors.Is(err, context.DeadlineExceeded):
			err = &UnavailableError{Addr: d.where, Op: op, Err: fmt.Errorf("%w (%v)", cause, d.cfg.OpTimeout)}
		default:
			err = &UnavailableError{Addr: d.where, Op: op, Err: err}
		}
	}
	if d.cfg.Observer != nil {
		d.cfg.Observer.ObserveOp(op, took, err)
	}
	return err
}

func (d *Directory) sessKey(id string) string { return d.sessPrefix + id }

func (d *Directory) sealToken(sessionID, token string) string {
	if token == "" {
		return ""
	}
	return d.keys.seal(sessionID, token)
}

// fencedOr maps the reply of update, release and delete.
func (d *Directory) fencedOr(sessionID, op string, res []string) error {
	switch verdictOf(res) {
	case vOK:
		return nil
	case vNotFound:
		return ErrNotFound
	case vFenced:
		d.counters.Fenced.Add(1)
		e, _ := strconv.ParseUint(at(res, 2), 10, 64)
		return &FencedError{SessionID: sessionID, Owner: at(res, 1), Epoch: e}
	}
	return d.unexpected(op, verdictOf(res))
}

func (d *Directory) unexpected(op string, v verdict) error {
	return &UnavailableError{Addr: d.where, Op: op, Err: fmt.Errorf("unexpected script reply %q", v)}
}

func verdictOf(s []string) verdict {
	if len(s) == 0 {
		return ""
	}
	return verdict(s[0])
}

func at(s []string, i int) string {
	if i < len(s) {
		return s[i]
	}
	return ""
}

// anyStrings flattens a script reply; nil entries become "".
func anyStrings(v []any) []string {
	s := make([]string, len(v))
	for i, x := range v {
		switch x := x.(type) {
		case string:
			s[i] = x
		case int64:
			s[i] = strconv.FormatInt(x, 10)
		}
	}
	return s
}

// recordFrom reads owner, epoch, caller, runtime, upstream, token, seq,
// updated_ms (the token is left out: callers decrypt it if they need it).
func recordFrom(id string, f []string) Record {
	r := Record{Session: Session{ID: id, Caller: at(f, 2), Runtime: at(f, 3), UpstreamSessionID: at(f, 4)}, Owner: at(f, 0)}
	r.Epoch, _ = strconv.ParseUint(at(f, 1), 10, 64)
	r.AckedSeq, _ = strconv.ParseUint(at(f, 6), 10, 64)
	if ms, err := strconv.ParseInt(at(f, 7), 10, 64); err == nil {
		r.UpdatedAt = time.UnixMilli(ms)
	}
	return r
}

// redact removes the password from a URL for messages.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// globEscape escapes SCAN MATCH metacharacters.
func globEscape(s string) string {
	var b strings.Builder
	for _, c := range s {
		switch c {
		case '*', '?', '[', ']', '\\':
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// recoverWindow is how long after the directory lost its data (its marker
// was re-created) a missing record is answered ErrRecovering rather than
// ErrNotFound: owners detect the loss within their loop's period and
// restore their records at once.
func (d *Directory) recoverWindow() time.Duration { return 2*d.cfg.LeaseTTL + 2*time.Second }

// OrphanScanEvery is Config.OrphanScanEvery.
func (d *Directory) OrphanScanEvery() time.Duration { return d.cfg.OrphanScanEvery }

// LeaseTTL is the lifetime of a replica's lease.
func (d *Directory) LeaseTTL() time.Duration { return d.cfg.LeaseTTL }

// Marker reads the directory's incarnation marker, creating it when it is
// missing. A marker other than the one read before means Redis lost its
// data in between (FLUSHALL, a restart without persistence, a failover to
// an empty replica): every owner must restore its records (Restore).
// Takeover refuses (ErrFlushed) while the marker is not the one last read.
func (d *Directory) Marker(ctx context.Context) (string, error) {
	var m string
	var id [8]byte
	_, _ = rand.Read(id[:])
	err := d.do(ctx, "marker", func(ctx context.Context) (err error) {
		lost := ""
		if d.LastMarker() != "" {
			lost = "r"
		}
		m, err = markerScript.Run(ctx, d.rdb, []string{d.markerKey}, hex.EncodeToString(id[:]), lost).Text()
		return err
	})
	if err != nil {
		return "", err
	}
	d.marker.Store(&m)
	return m, nil
}

// LastMarker is the marker last read by Marker ("" before).
func (d *Directory) LastMarker() string {
	if p := d.marker.Load(); p != nil {
		return *p
	}
	return ""
}

// Restore re-creates the record of a session this replica owns at epoch,
// after the directory lost its data: it creates it, or replaces one at a
// lower epoch; a record at the same epoch of this replica is left as it
// is; anything else is a *FencedError.
func (d *Directory) Restore(ctx context.Context, s Session, epoch uint64) error {
	return d.restore(ctx, s, epoch, false)
}

// RestoreIfAbsent is Restore that never replaces a record at a lower
// epoch: where any record other than this replica's at epoch is, it
// answers ErrFenced. It is the restore of a claim not yet resumed and not
// confirmed since a lapse (cluster.Work.IfAbsent): the previous owner,
// whose transport no resume has cut, may have restored its own.
func (d *Directory) RestoreIfAbsent(ctx context.Context, s Session, epoch uint64) error {
	return d.restore(ctx, s, epoch, true)
}

func (d *Directory) restore(ctx context.Context, s Session, epoch uint64, ifAbsent bool) error {
	absent := "0"
	if ifAbsent {
		absent = "1"
	}
	var res []string
	err := d.do(ctx, "restore", func(ctx context.Context) (err error) {
		res, err = restoreScript.Run(ctx, d.rdb, []string{d.sessKey(s.ID)},
			d.cfg.Instance, strconv.FormatUint(epoch, 10), s.Caller, s.Runtime, s.UpstreamSessionID,
			d.sealToken(s.ID, s.ResumeToken), strconv.FormatUint(s.AckedSeq, 10), d.cfg.SessionTTL.Milliseconds(),
			d.ownedPrefix, s.ID, absent).StringSlice()
		return err
	})
	if err != nil {
		return err
	}
	return d.fencedOr(s.ID, "restore", res)
}

// PeerLease is a registered replica's lease as read by Peers.
type PeerLease struct {
	Instance string
	Live     bool
	TTLLeft  time.Duration
}

// Peers reads the lease of every replica in the registry (read-only, one
// round trip, O(replicas)).
func (d *Directory) Peers(ctx context.Context) ([]PeerLease, error) {
	var res []string
	err := d.do(ctx, "peers", func(ctx context.Context) (err error) {
		res, err = peersScript.RunRO(ctx, d.rdb, nil, d.registryKey, d.leasePrefix).StringSlice()
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]PeerLease, 0, len(res)/2)
	for i := 0; i+1 < len(res); i += 2 {
		ms, _ := strconv.ParseInt(res[i+1], 10, 64)
		out = append(out, PeerLease{Instance: res[i], Live: ms > 0, TTLLeft: time.Duration(max(ms, 0)) * time.Millisecond})
	}
	return out, nil
}

// CheckInstance refuses to start a second process with a live instance id:
// if another incarnation holds this instance's lease, it waits (at most
// LeaseTTL and a little, bounded by ctx) for that lease to expire — a
// crashed process's lease does — and returns an error wrapping
// ErrInstanceInUse if it is refreshed meanwhile (its holder is alive).
func (d *Directory) CheckInstance(ctx context.Context) error {
	probe := func() (inc string, ttl time.Duration, err error) {
		var res []string
		err = d.do(ctx, "lease", func(ctx context.Context) (err error) {
			res, err = leaseProbeScript.RunRO(ctx, d.rdb, []string{d.leaseKey}).StringSlice()
			return err
		})
		if err != nil || len(res) < 2 {
			return "", 0, err
		}
		ms, _ := strconv.ParseInt(res[1], 10, 64)
		return res[0], time.Duration(ms) * time.Millisecond, nil
	}
	inc, ttl, err := probe()
	if err != nil || inc == "" || inc == d.incarnation {
		return err
	}
	deadline := time.Now().Add(d.cfg.LeaseTTL + d.cfg.LeaseTTL/2)
	last := ttl
	for {
		wait := min(max(ttl, time.Millisecond), d.cfg.LeaseTTL/3)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return context.Cause(ctx)
		case <-t.C:
		}
		inc2, ttl2, err := probe()
		switch {
		case err != nil:
			return err
		case inc2 == "" || inc2 == d.incarnation:
			return nil // expired: its holder is gone
		case inc2 != inc || ttl2 > last || time.Now().After(deadline):
			return fmt.Errorf("%w: instance id %q is held by a live process (its lease is being refreshed); give each replica its own --instance-id", ErrInstanceInUse, d.cfg.Instance)
		}
		ttl, last = ttl2, ttl2
	}
}

// OrphansOf returns the sessions that may be taken over from the given
// replicas (their lease is gone, as the caller judged) and every released
// session, from the owner index the scripts keep: O(orphans), not
// O(records). Stale index entries are dropped on the way, and a replica
// with no lease and nothing left leaves the registry.
func (d *Directory) OrphansOf(ctx context.Context, instances []string) ([]Orphan, error) {
	args := []any{d.sessPrefix, d.ownedPrefix, d.releasedKey, d.leasePrefix, d.registryKey}
	for _, inst := range instances {
		args = append(args, inst)
	}
	var res []string
	err := d.do(ctx, "orphans", func(ctx context.Context) (err error) {
		res, err = orphansIndexScript.Run(ctx, d.rdb, nil, args...).StringSlice()
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]Orphan, 0, len(res)/3)
	for i := 0; i+2 < len(res); i += 3 {
		e, _ := strconv.ParseUint(res[i+2], 10, 64)
		out = append(out, Orphan{SessionID: res[i], Owner: res[i+1], Epoch: e})
	}
	d.counters.OrphanChecks.Add(1)
	return out, nil
}
