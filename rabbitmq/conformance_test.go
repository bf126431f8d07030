package rabbitmq

import (
	"testing"
	"time"

	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/driver/drivertest"
)

// TestConformance runs the shared driver conformance suite against
// RabbitMQ.
func TestConformance(t *testing.T) {
	url := testURL(t)
	drivertest.RunConformance(t, func(t *testing.T) driver.Conn {
		c, err := Open(ctxFor(t, 30*time.Second), driver.Config{URLs: []string{url}, Name: "acemq-conformance"})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		return c
	})
}
