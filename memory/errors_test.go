package memory

import (
	"errors"
	"strings"
	"testing"

	"github.com/acemq/acemq/driver"
)

// A publish to an exchange that does not exist wraps driver.ErrNotFound and
// says memory: once, as the package documents (docs on the module's errors:
// doc.go, "Errors").
func TestPublishToMissingExchangeSaysMemoryOnce(t *testing.T) {
	c := fresh(t)
	err := c.Publish(ctx, driver.Message{Exchange: "missing", RoutingKey: "k"})
	if !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("publish to a missing exchange = %v, want an error wrapping driver.ErrNotFound", err)
	}
	if n := strings.Count(err.Error(), "memory: "); n != 1 {
		t.Errorf("publish to a missing exchange = %q: says memory: %d times, want once", err, n)
	}
}
