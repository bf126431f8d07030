package contract_test

import (
	"testing"
	"time"

	"github.com/acemq/acemq/contract"
)

// The names are the wire contract's (docs/wire.md §5): a change here is a
// change on the wire.
func TestNames(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{contract.DeadLetterQueue("orders"), "orders.dlq"},
		{contract.ParkedQueue("orders"), "orders.parked"},
		{contract.RungQueue("orders", 30*time.Second), "orders.retry.30s"},
		{contract.RungQueue("orders", 5*time.Minute), "orders.retry.5m"},
		{contract.RungQueue("orders", 2*time.Hour), "orders.retry.2h"},
		{contract.RungQueue("orders", 1500*time.Millisecond), "orders.retry.1500ms"},
		{contract.DeadLetterExchange, "acemq.dlx"},
		{contract.RetryExchange, "acemq.retry"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
	if contract.MaxErrorHeaderBytes != 4096 {
		t.Errorf("MaxErrorHeaderBytes = %d, want 4096", contract.MaxErrorHeaderBytes)
	}
}
