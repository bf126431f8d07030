package contract_test

import (
	"fmt"
	"time"

	"github.com/acemq/acemq/contract"
)

// The queues a consumer of "orders" with a retry policy sets messages
// aside to.
func Example() {
	fmt.Println(contract.DeadLetterQueue("orders"))
	fmt.Println(contract.ParkedQueue("orders"))
	fmt.Println(contract.RungQueue("orders", 30*time.Second))
	// Output:
	// orders.dlq
	// orders.parked
	// orders.retry.30s
}
