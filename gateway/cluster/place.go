package cluster

// Preferred is the replica a session belongs on: the rendezvous
// (highest-random-weight) hash of its id over the live replicas. Every
// replica computes the same answer from the same set, a replica's arrival
// or departure moves only the sessions it wins or held (1/N of them), and
// the spread is even in expectation. "" when replicas is empty.
//
// The weight of (replica, session) is a 64-bit FNV-1a hash of
// replica "\x00" session, finished with the splitmix64 mixer; ties (never
// seen in practice) go to the smaller replica id. Other implementations
// (a balancer, a client) can compute it from this description.
func Preferred(session string, replicas []string) string {
	best, bestW := "", uint64(0)
	for _, r := range replicas {
		w := Weight(r, session)
		if best == "" || w > bestW || (w == bestW && r < best) {
			best, bestW = r, w
		}
	}
	return best
}

// Weight is the rendezvous weight of session on replica (see Preferred).
func Weight(replica, session string) uint64 {
	const offset, prime = 14695981039346656037, 1099511628211
	h := uint64(offset)
	for i := 0; i < len(replica); i++ {
		h = (h ^ uint64(replica[i])) * prime
	}
	h = (h ^ 0) * prime
	for i := 0; i < len(session); i++ {
		h = (h ^ uint64(session[i])) * prime
	}
	// splitmix64 finaliser: FNV's low avalanche is not enough for HRW.
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return h
}
