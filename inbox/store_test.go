package inbox_test

import (
	"testing"

	"github.com/acemq/acemq/inbox"
	"github.com/acemq/acemq/internal/storetest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestMemoryStore(t *testing.T) {
	storetest.Inbox(t, func(*testing.T) inbox.Store { return inbox.NewMemory() })
}
