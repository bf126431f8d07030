package memory

import (
	"testing"

	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/driver/drivertest"
)

func TestConformance(t *testing.T) {
	url := newURL(t)
	drivertest.RunConformance(t, func(t *testing.T) driver.Conn {
		return dial(t, url)
	})
}
