package tombstone_test

import (
	"fmt"
	"time"

	"github.com/sessiongate/sessiongate/gateway/tombstone"
)

func Example() {
	now := time.Now()
	ttl := tombstone.TTL(30*time.Second, 10*time.Second, 30*time.Second, 0) // 75s
	long := tombstone.TTL(30*time.Second, 10*time.Second, 30*time.Second, 2*time.Minute)

	s := tombstone.New(100_000)
	s.Insert("request-1", ttl, now)
	s.Insert("request-2", long, now)
	fmt.Println(ttl, long)
	fmt.Println(s.Contains("request-1", now.Add(time.Minute)), s.Contains("request-3", now))

	// Expire costs O(expired): call it from a timer.
	fmt.Println(s.Expire(now.Add(2*time.Minute)), s.Len())
	fmt.Println(s.Take("request-2", now.Add(2*time.Minute)), s.Len())
	// Output:
	// 1m15s 2m45s
	// true false
	// 1 1
	// true 0
}
