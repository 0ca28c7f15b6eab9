package arcpruntime

import (
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sessiongate/sessiongate/gateway/arcp"
)

// LeaseLimits bound what a job.submit may ask for (§7.1, §9). A request
// beyond them is refused with PERMISSION_DENIED; a malformed one with
// INVALID_REQUEST.
type LeaseLimits struct {
	// Namespaces are the capability namespaces the runtime grants.
	// Nil means the seven reserved namespaces of §9.2.
	Namespaces []string
	// MaxBudget caps each cost.budget currency; a currency not named is
	// refused. Nil means USD and EUR 100, credits 100000.
	MaxBudget map[string]float64
	// MaxLeaseDuration caps lease_constraints.expires_at (from now).
	// Default 24 h.
	MaxLeaseDuration time.Duration
}

// Reserved capability namespaces (§9.2).
var reservedNamespaces = []string{"fs.read", "fs.write", "net.fetch", "tool.call", "agent.delegate", "cost.budget", "model.use"}

func (l LeaseLimits) withDefaults() LeaseLimits {
	if l.Namespaces == nil {
		l.Namespaces = reservedNamespaces
	}
	l.Namespaces = slices.Clone(l.Namespaces)
	if l.MaxBudget == nil {
		l.MaxBudget = map[string]float64{"USD": 100, "EUR": 100, "credits": 100000}
	}
	l.MaxBudget = maps.Clone(l.MaxBudget)
	if l.MaxLeaseDuration <= 0 {
		l.MaxLeaseDuration = 24 * time.Hour
	}
	return l
}

// grant is what a submit's lease request becomes: the effective lease (the
// request, granted whole), its constraints and the initial budget.
type grant struct {
	lease       json.RawMessage // "{}" when nothing was requested
	constraints *arcp.LeaseConstraints
	expiresAt   time.Time // zero: no expiry
	budget      map[string]float64
}

// leaseError is a refused lease: code is INVALID_REQUEST or
// PERMISSION_DENIED.
type leaseError struct{ code, msg string }

func (e *leaseError) Error() string { return e.msg }

// grantLease checks a submit's lease request and constraints against the
// negotiated features and the limits.
func grantLease(p arcp.Submit, features map[string]bool, lim LeaseLimits, now time.Time) (grant, error) {
	invalid := func(msg string) (grant, error) { return grant{}, &leaseError{arcp.CodeInvalidRequest, msg} }
	denied := func(msg string) (grant, error) { return grant{}, &leaseError{arcp.CodePermissionDenied, msg} }
	g := grant{lease: json.RawMessage("{}")}
	lease, err := arcp.ParseLease(p.LeaseRequest)
	if err != nil {
		return invalid("lease_request must be an object of string lists")
	}
	for _, ns := range slices.Sorted(maps.Keys(lease)) {
		if ns == arcp.FeatureCostBudget && !features[arcp.FeatureCostBudget] {
			return invalid("cost.budget was not negotiated")
		}
		if ns == arcp.FeatureModelUse && !features[arcp.FeatureModelUse] {
			return invalid("model.use was not negotiated")
		}
		if !slices.Contains(lim.Namespaces, ns) {
			return denied("capability namespace " + strconv.Quote(truncate(ns, 64)) + " is not granted by this runtime")
		}
		for _, pat := range lease[ns] {
			if pat == "" {
				return invalid("empty pattern in lease_request[" + strconv.Quote(truncate(ns, 64)) + "]")
			}
		}
	}
	if amounts := lease[arcp.FeatureCostBudget]; len(amounts) > 0 {
		g.budget = make(map[string]float64, len(amounts))
		for _, a := range amounts {
			cur, dec, ok := strings.Cut(a, ":")
			v, err := strconv.ParseFloat(dec, 64)
			if !ok || cur == "" || err != nil || v < 0 || strings.ContainsAny(dec, "eE+-") {
				return invalid("cost.budget amount " + strconv.Quote(truncate(a, 64)) + " is not currency:decimal")
			}
			limit, known := lim.MaxBudget[cur]
			if !known {
				return denied("cost.budget currency " + strconv.Quote(truncate(cur, 32)) + " is not accepted by this runtime")
			}
			if g.budget[cur]+v > limit {
				return denied("cost.budget " + strconv.Quote(truncate(a, 64)) + " exceeds this runtime's limit " + cur + ":" + strconv.FormatFloat(limit, 'f', -1, 64))
			}
			g.budget[cur] += v
		}
	}
	if len(lease) > 0 {
		g.lease, _ = json.Marshal(lease) // strings only
	}
	if c := p.LeaseConstraints; c != nil && c.ExpiresAt != "" {
		if !features[arcp.FeatureLeaseExpiresAt] {
			return invalid("lease_expires_at was not negotiated")
		}
		if !strings.HasSuffix(c.ExpiresAt, "Z") {
			return invalid("lease_constraints.expires_at must be UTC with a Z suffix")
		}
		at, err := time.Parse(time.RFC3339Nano, c.ExpiresAt)
		if err != nil {
			return invalid("lease_constraints.expires_at is not RFC 3339")
		}
		if !at.After(now) {
			return invalid("lease_constraints.expires_at is not in the future")
		}
		if at.Sub(now) > lim.MaxLeaseDuration {
			return denied("lease_constraints.expires_at is beyond this runtime's maximum lease of " + lim.MaxLeaseDuration.String())
		}
		g.constraints, g.expiresAt = &arcp.LeaseConstraints{ExpiresAt: c.ExpiresAt}, at
	}
	return g, nil
}

// vendorExtensions keeps the "x-vendor.*" extensions of an envelope,
// marshalled as one JSON object (nil when there are none).
func vendorExtensions(ext map[string]json.RawMessage) []byte {
	var keep map[string]json.RawMessage
	for k, v := range ext {
		if arcp.ValidExtensionKey(k) {
			if keep == nil {
				keep = make(map[string]json.RawMessage)
			}
			keep[k] = v
		}
	}
	if keep == nil {
		return nil
	}
	b, err := json.Marshal(keep)
	if err != nil {
		return nil
	}
	return b
}

var errLeaseExpired = errors.New("arcpruntime: lease expired")
