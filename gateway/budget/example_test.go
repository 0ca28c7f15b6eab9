package budget_test

import (
	"errors"
	"fmt"

	"github.com/sessiongate/sessiongate/gateway/budget"
)

// A gateway-wide cap of 1 GiB of retained bytes, 256 MiB per caller; an
// upstream connection gets the caller's Account and reserves before it keeps
// a result.
func Example() {
	retained, _ := budget.New("retained_bytes", 1<<30, 256<<20)
	acct := retained.Account("alice")
	if err := acct.Reserve(200 << 20); err != nil {
		fmt.Println(err)
	}
	err := acct.Reserve(100 << 20)
	var ee *budget.ExceededError
	if errors.As(err, &ee) {
		fmt.Println(ee.Budget, ee.Limit>>20, "MiB")
	}
	acct.Release(200 << 20)
	fmt.Println(retained.Stats().InUse)
	// Output:
	// retained_bytes_per_caller 256 MiB
	// 0
}
