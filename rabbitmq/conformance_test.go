package rabbitmq

import (
	"testing"
	"time"

	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/driver/drivertest"
	"github.com/acemq/acemq/internal/testenv"
)

// TestConformance runs the shared driver conformance suite against
// RabbitMQ.
func TestConformance(t *testing.T) {
	url := testenv.AMQPURL(t)
	drivertest.RunConformance(t, func(t *testing.T) driver.Conn {
		c, err := open(ctxFor(t, 30*time.Second), driver.Config{URLs: []string{url}, Name: "acemq-conformance"})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		return c
	})
}
