package outbox_test

import (
	"testing"

	"github.com/acemq/acemq/internal/storetest"
	"github.com/acemq/acemq/outbox"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestMemoryStore(t *testing.T) {
	storetest.Outbox(t, func(*testing.T) outbox.Store { return outbox.NewMemory() })
}
